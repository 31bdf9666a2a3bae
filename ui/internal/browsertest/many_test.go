package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/pgstore/pgtest"
	"github.com/jobstate/jobstate/ui"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

// TestManyJobsOnPostgres serves the list and the overview of a PostgreSQL
// store holding JOBSTATE_UI_MANY jobs (skipped when unset), and logs how
// long each page takes: the list pages by keyset and the overview reads
// the store's per-state counts, so neither grows with the table.
func TestManyJobsOnPostgres(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBSTATE_UI_MANY"))
	if n <= 0 {
		t.Skip("set JOBSTATE_UI_MANY=100000 to measure the pages on that many jobs")
	}
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	env, store := pgtest.NewEnv(t, jobstate.WithMachines(def))
	start := time.Now()
	for done := 0; done < n; {
		batch := make([]jobstate.NewJob, 0, 1000)
		for i := 0; i < 1000 && done+i < n; i++ {
			batch = append(batch, jobstate.NewJob{Machine: uitest.MachineName, Payload: []byte(fmt.Sprintf(`{"n":%d}`, done+i)), Owner: fmt.Sprintf("owner-%d", (done+i)%100)})
		}
		if _, err := env.Engine.CreateMany(env.Ctx, batch); err != nil {
			t.Fatal(err)
		}
		done += len(batch)
		env.Advance(time.Millisecond)
	}
	t.Logf("%d jobs created in %s", n, time.Since(start).Round(time.Millisecond))
	if os.Getenv("JOBSTATE_UI_ANALYZE") == "1" {
		// What autovacuum does on its own once the table has grown.
		if _, err := store.Pool().Exec(env.Ctx, "ANALYZE jobs"); err != nil {
			t.Fatal(err)
		}
		t.Log("analyzed")
	}
	h, err := ui.New(ui.Options{Engine: env.Engine, Machines: []string{uitest.MachineName}})
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`<a class="job" href=`)
	next := regexp.MustCompile(`<a id="next" href="([^"]+)">`)
	get := func(what, path string, rows int) string {
		t.Helper()
		var body string
		var best time.Duration
		for i := 0; i < 3; i++ {
			rec := httptest.NewRecorder()
			began := time.Now()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://ui.test"+path, nil))
			took := time.Since(began)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: %d %.300s", what, rec.Code, rec.Body)
			}
			if i == 0 || took < best {
				best = took
			}
			body = rec.Body.String()
		}
		if rows >= 0 && len(row.FindAllString(body, -1)) != rows {
			t.Fatalf("%s: %d rows, want %d", what, len(row.FindAllString(body, -1)), rows)
		}
		t.Logf("%-40s best of 3: %s", what, best.Round(10*time.Microsecond))
		return body
	}
	get("overview", "/", -1)
	body := get("first page, newest first", "/jobs", 50)
	for i := 0; i < 200; i++ {
		m := next.FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no next page")
		}
		path := strings.ReplaceAll(m[1], "&amp;", "&")
		if i < 199 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://ui.test"+path, nil))
			body = rec.Body.String()
			continue
		}
		get("page 201 (by its cursor)", path, 50)
	}
	get("oldest first", "/jobs?order=created&dir=asc", 50)
	get("by update time", "/jobs?order=updated&dir=desc", 50)
	get("one owner (1% of the jobs)", "/jobs?owner=owner-7", 50)
	get("one state", "/jobs?machine=queue&state=QUEUED", 50)
	get("an empty state", "/jobs?machine=queue&state=FAILED", 0)
}
