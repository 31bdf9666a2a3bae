package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/ui"
)

// serveUI serves the operators' web interface (the ui module) over the
// store until ctx ends (SIGINT or SIGTERM), then shuts the server down,
// letting requests in progress finish for up to five seconds. It is
// read-only unless --actions is given; then cancel, redrive and retry are
// offered, each recorded with --actor. It listens on the loopback
// interface by default: the interface has no login of its own.
func (a *app) serveUI(ctx context.Context, args []string) error {
	fs := a.newFlags("ui", "[--addr HOST:PORT] [--actions [--actor WHO]]")
	var sf storeFlags
	sf.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on (port 0: any free port)")
	actions := fs.Bool("actions", false, "offer cancel, redrive and retry on the job pages (default: read-only)")
	actor := fs.String("actor", "", "who the history records as making the moves made from the pages (default $USER@host)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("ui: unexpected argument %q", pos[0])
	}
	who := *actor
	if who == "" {
		who = a.defaultActor()
	}
	if err := checkText("actor", who, jobstate.MaxKeyBytes); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		return usagef("--addr %q: %v", *addr, err)
	}
	db, defs, err := a.checkStore(sf)
	if err != nil {
		return err
	}
	if len(defs) == 0 {
		return usagef("ui: no definitions given (--definitions or JOBSTATE_DEFINITIONS): the machines shown come from them")
	}
	s, err := a.open(ctx, db, defs, 4)
	if err != nil {
		return err
	}
	defer s.close()
	opt := ui.Options{Engine: s.eng, Machines: machineNames(defs)}
	if *actions {
		opt.Authorize = func(*http.Request, string, jobstate.Job) (string, bool) { return who, true }
	}
	h, err := ui.New(opt)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := "read-only"
	if *actions {
		mode = "actions recorded as " + who
	}
	fmt.Fprintf(a.stdout, "serving http://%s/ (%s); stop with Ctrl-C\n", ln.Addr(), mode)
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: %w", err)
	}
	return <-stopped
}
