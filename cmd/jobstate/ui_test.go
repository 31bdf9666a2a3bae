package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a buffer safe for a server goroutine writing and a test
// reading.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve runs `jobstate ui` with args and the database's flags until the
// test ends, and returns the base URL it printed.
func (d *db) serve(t *testing.T, args ...string) string {
	t.Helper()
	a, _, _ := testApp(nil)
	var stdout, stderr syncBuffer
	a.stdout, a.stderr = &stdout, &stderr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- a.run(ctx, append(append([]string{"ui", "--addr", "127.0.0.1:0"}, args...), d.flags...))
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("jobstate ui exited %d: %s", code, stderr.String())
		}
	})
	addr := regexp.MustCompile(`serving (http://\S+)/ `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := addr.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("jobstate ui exited %d before serving: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobstate ui printed no address: %q %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// `jobstate ui` serves the web interface over the store: the overview
// counts the machines' jobs, a job's page shows it; read-only by default,
// with cancel offered only under --actions, and a cancel from the page is
// recorded with the operator as actor. It stops with exit 0 when its
// context ends.
func TestUIServesTheStore(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	jobs := d.create(t, "queue", 3)

	base := d.serve(t)
	code, body := get(t, base+"/")
	if code != http.StatusOK || !strings.Contains(body, "queue") || !strings.Contains(body, "QUEUED") {
		t.Fatalf("overview: %d\n%s", code, body)
	}
	code, body = get(t, base+"/jobs/"+jobs[0].ID.String())
	if code != http.StatusOK || !strings.Contains(body, jobs[0].ID.String()) {
		t.Fatalf("job page: %d\n%s", code, body)
	}
	if strings.Contains(body, `id="action-cancel"`) {
		t.Errorf("a read-only interface offers an action:\n%s", body)
	}
	resp, err := http.PostForm(base+"/jobs/"+jobs[0].ID.String()+"/cancel", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST to a read-only interface: %d, want 403", resp.StatusCode)
	}

	withActions := d.serve(t, "--actions", "--actor", "ops@desk")
	_, body = get(t, withActions+"/jobs/"+jobs[1].ID.String())
	form := regexp.MustCompile(`(?s)<form method="post" action="([^"]+)" class="action">\s*<input type="hidden" name="token" value="([^"]+)">.{0,200}?id="action-cancel"`).FindStringSubmatch(body)
	if form == nil {
		t.Fatalf("--actions offers no cancel:\n%s", body)
	}
	req, err := http.NewRequest(http.MethodPost, withActions+strings.ReplaceAll(form[1], "&amp;", "&"), strings.NewReader(url.Values{"token": {form[2]}, "reason": {"from the page"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", withActions)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		t.Fatalf("cancel from the page: %d", resp.StatusCode)
	}
	h := d.histories(t, jobs[1:2])[0]
	last := h[len(h)-1]
	if last.Event != "cancel" || last.Actor != "ops@desk" || last.Reason != "from the page" {
		t.Errorf("the cancel was recorded as %+v, want the operator's, with the reason given", last)
	}
}

func TestUIRefusals(t *testing.T) {
	t.Parallel()
	runArgs(t, "ui", "--addr", "nope").wantCode(t, exitUsage)
	runArgs(t, "ui", "extra").wantCode(t, exitUsage)
	d := newDB(t)
	runArgs(t, "ui", "--database-url", d.url, "--schema", d.schema).wantCode(t, exitUsage) // no definitions
}
