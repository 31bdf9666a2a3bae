package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jobstate/jobstate"
)

// Exit codes.
const (
	// exitOK: the command did what it was asked.
	exitOK = 0
	// exitRefused: definition problems, a move refused or failed, a job
	// not found, a schema not ready.
	exitRefused = 1
	// exitUsage: the command line is wrong (unknown flag or command, a bad
	// value, a malformed id, an unknown machine or state, a bad URL).
	exitUsage = 2
	// exitDatabase: the database could not be reached or failed.
	exitDatabase = 3
	// exitInterrupted: the command was interrupted (SIGINT, SIGTERM).
	exitInterrupted = 130
)

// exitError is an error with the exit code it ends the command with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Sentinels of the command's own errors, matched with errors.Is.
var (
	// errUsage: the command line is wrong.
	errUsage = errors.New("usage")
	// errRefused: the command ran and something was refused or invalid.
	errRefused = errors.New("refused")
)

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)}
}

// refusedf is a refusal (exit 1).
func refusedf(format string, args ...any) error {
	return &exitError{code: exitRefused, err: fmt.Errorf("%w: "+format, append([]any{errRefused}, args...)...)}
}

// app is one run of the command: where it writes and what it knows of its
// environment. Nothing in it outlives the run.
type app struct {
	stdout, stderr io.Writer
	// getenv reads the environment (os.Getenv).
	getenv func(string) string
	// hostname names the machine, for the default actor (os.Hostname).
	hostname func() (string, error)
	// terminal is set when stderr is a terminal: bulk actions then show
	// their progress there.
	terminal bool
	// beforeAct, when set, is called before each move of a job, with the
	// job as listed (tests use it to change a job meanwhile).
	beforeAct func(ctx context.Context, job jobstate.Job)
}

// run runs the command line args (without the program's name), writing
// its output to stdout and its errors, one line each, to stderr, and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: os.Getenv, hostname: os.Hostname, terminal: isTerminal(stderr)}
	return a.run(ctx, args)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// command is one command: its name, its function and one line of help.
type command struct {
	name    string
	fn      func(a *app, ctx context.Context, args []string) error
	summary string
}

// commands returns every command, in the order of the help.
func commands() []command {
	return []command{
		{"validate", (*app).validate, "check JSON definitions, printing every problem"},
		{"diagram", (*app).diagram, "print a JSON definition as a Mermaid state diagram"},
		{"migrate", (*app).migrate, "migrate up | migrate status: the store's schema"},
		{"list", (*app).list, "list jobs by filters, a page at a time"},
		{"get", (*app).get, "show a job with its history, executions and effects"},
		{"counts", (*app).counts, "count jobs per machine and state"},
		{"cancel", actionCommand(cancelAction), "cancel a job, or every job a filter selects"},
		{"redrive", actionCommand(redriveAction), "run a finished job again as a new job"},
		{"retry", actionCommand(retryAction), "run a failed job again as a new job"},
		{"ui", (*app).serveUI, "serve the web interface over the store"},
	}
}

// lookupCommand returns the command named name, if there is one.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		a.usage(a.stdout)
		return exitOK
	}
	cmd, ok := lookupCommand(name)
	if !ok {
		return a.fail(usagef("unknown command %q (run `jobstate help`)", name))
	}
	err := cmd.fn(a, ctx, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return a.fail(err)
}

// fail writes err as one line on stderr and returns its exit code.
func (a *app) fail(err error) int {
	if err == nil {
		return exitOK
	}
	code := exitRefused
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case errors.Is(err, context.Canceled):
		code = exitInterrupted
	case errors.Is(err, jobstate.ErrUnavailable):
		code = exitDatabase
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, errUsage.Error()+": ")
	msg = strings.TrimPrefix(msg, errRefused.Error()+": ")
	fmt.Fprintln(a.stderr, "jobstate: "+oneLine(msg))
	return code
}

// oneLine joins the lines of s, so that an error is one line.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: jobstate COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `jobstate COMMAND -h` for a command's flags; docs/command.md is the manual.")
}

// newFlags returns a flag set for a command that reports its own errors:
// the caller turns them into one line and exit code 2.
func (a *app) newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(a.stdout)
		fmt.Fprintf(a.stdout, "Usage: jobstate %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args with fs, flags and positional arguments in any order
// ("get ID --json" as well as "get --json ID"); "--" ends the flags. It
// returns the positional arguments, or a usage error (flag.ErrHelp for
// -h, after the help is printed).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first positional argument, or after "--".
		if endedFlags(fs, args[:len(args)-len(rest)]) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// endedFlags reports whether the arguments fs.Parse consumed end with the
// "--" that ends the flags, rather than with a "--" given as a flag's
// value ("--reason --").
func endedFlags(fs *flag.FlagSet, consumed []string) bool {
	n := len(consumed)
	if n == 0 || consumed[n-1] != "--" {
		return false
	}
	if n == 1 {
		return true
	}
	prev := strings.TrimLeft(consumed[n-2], "-")
	if consumed[n-2] == prev || strings.Contains(prev, "=") || endedFlags(fs, consumed[:n-1]) {
		return true // not a flag, a flag with its value, or after "--"
	}
	f := fs.Lookup(prev)
	if f == nil {
		return true
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return true
	}
	return false // "--" was the value of the flag before it
}
