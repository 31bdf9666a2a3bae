package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/sqlitestore"
	"github.com/jobstate/jobstate/sqlitestore/internal/crashmachine"
)

// integrity runs SQLite's integrity check on the file at path.
func integrity(t *testing.T, path string) {
	t.Helper()
	s := openAt(t, path, sqlitestore.Options{})
	var check string
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check)
}

// TestDiskFull: once the file cannot grow (a full disk, simulated with
// max_page_count), a creation fails with a typed error and writes
// nothing, an update's effect row goes with it, the jobs written before
// are intact, and with room again the store goes on.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "full.db")
	s := openAt(t, path, sqlitestore.Options{})
	_, err := s.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	var pages int64
	require.NoError(t, s.DB().QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, s.Close())

	s, err = sqlitestore.Open(ctx, path, sqlitestore.Options{MaxPageCount: pages + 8})
	require.NoError(t, err)
	eng := engineOn(t, s)
	payload := bytes.Repeat([]byte("x"), 3000)
	var kept []jobstate.Job
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		c, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name, Payload: payload})
		if err != nil {
			full = err
			break
		}
		kept = append(kept, c.Job)
	}
	require.Error(t, full, "the file stopped growing")
	assert.ErrorIs(t, full, jobstate.ErrUnavailable)
	assert.ErrorIs(t, full, sqlitestore.ErrDiskFull)
	var ue *jobstate.UnavailableError
	require.True(t, errors.As(full, &ue))
	assert.False(t, ue.MayHaveApplied, "a full disk leaves nothing applied")
	n, err := s.Count(ctx, crashmachine.Name)
	require.NoError(t, err)
	assert.Equal(t, len(kept), n["queued"], "the refused creation wrote nothing")
	require.NotEmpty(t, kept)
	require.NoError(t, s.Close())

	// With room again, everything written before is there and whole.
	integrity(t, path)
	s2 := openAt(t, path, sqlitestore.Options{})
	for _, j := range kept {
		got, err := s2.Get(ctx, j.ID)
		require.NoError(t, err)
		assert.Equal(t, payload, got.Payload)
	}
	_, err = engineOn(t, s2).Create(ctx, jobstate.NewJob{Machine: crashmachine.Name, Payload: payload})
	require.NoError(t, err)
}

// TestDiskFullCommit: a commit whose effect row does not fit is refused
// with a typed error, neither the row nor the commit is written, and the
// job can be committed once there is room.
func TestDiskFullCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "full.db")
	s := openAt(t, path, sqlitestore.Options{})
	_, err := s.DB().ExecContext(ctx, crashmachine.CreateTable)
	require.NoError(t, err)
	eng := engineOn(t, s)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: "w"})
	require.NoError(t, err)
	var pages int64
	require.NoError(t, s.DB().QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	_, err = s.DB().ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages))
	require.NoError(t, err)
	big := bytes.Repeat([]byte("r"), 64<<10)
	effect := func(ctx context.Context, j jobstate.Job) error {
		tx, _ := sqlitestore.Tx(ctx)
		_, err := tx.ExecContext(ctx, "INSERT INTO "+crashmachine.Table+" (job, worker) VALUES (?, ?)", big, "w")
		return err
	}
	_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: effect})
	require.ErrorIs(t, err, sqlitestore.ErrDiskFull)
	assert.Equal(t, 0, receipts(t, s))
	got, err := eng.Get(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, jobstate.State("running"), got.State)

	_, err = s.DB().ExecContext(ctx, "PRAGMA max_page_count = 1073741823")
	require.NoError(t, err)
	_, err = eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Effect: effect})
	require.NoError(t, err)
	assert.Equal(t, 1, receipts(t, s))
}

// makeReadOnly makes the file or directory at path unwritable, even for
// root (with chattr +i, where it can), and undoes it when t ends; it
// skips t when it cannot.
func makeReadOnly(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	mode := info.Mode().Perm()
	require.NoError(t, os.Chmod(path, mode&^0o222))
	t.Cleanup(func() { _ = os.Chmod(path, mode) })
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("as root, a file is read-only only with chattr +i, which failed: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	}
	probe := path
	if info.IsDir() {
		probe = filepath.Join(path, "probe-"+uuid.NewString())
	}
	if f, err := os.OpenFile(probe, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
		f.Close()
		t.Skip("the file system lets this process write whatever the mode")
	}
}

// TestReadOnlyFile: a database file that cannot be written gives a typed
// error at Open, and its jobs are intact once it can be written again.
func TestReadOnlyFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ro.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	require.NoError(t, err)
	c, err := engineOn(t, s).Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	t.Run("file", func(t *testing.T) {
		makeReadOnly(t, path)
		_, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
		require.Error(t, err)
		assert.ErrorIs(t, err, jobstate.ErrUnavailable)
		assert.True(t, errors.Is(err, sqlitestore.ErrReadOnly) || errors.Is(err, sqlitestore.ErrIO), "%v", err)
	})
	t.Run("disk", func(t *testing.T) {
		// The file, the files beside it and the directory: nothing can
		// be written or created.
		matches, err := filepath.Glob(path + "*")
		require.NoError(t, err)
		for _, m := range matches {
			makeReadOnly(t, m)
		}
		makeReadOnly(t, dir)
		_, err = sqlitestore.Open(ctx, path, sqlitestore.Options{})
		require.Error(t, err)
		assert.ErrorIs(t, err, jobstate.ErrUnavailable)
		assert.True(t, errors.Is(err, sqlitestore.ErrReadOnly) || errors.Is(err, sqlitestore.ErrIO), "%v", err)
		_, err = sqlitestore.Open(ctx, filepath.Join(dir, "new.db"), sqlitestore.Options{})
		assert.ErrorIs(t, err, jobstate.ErrUnavailable, "no new file in a read-only directory")
	})
	integrity(t, path)
	s2 := openAt(t, path, sqlitestore.Options{})
	got, err := s2.Get(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, c.Job.ID, got.ID)
}

// TestReadOnlyWhileOpen: a file that becomes unwritable while the store
// is open gives typed errors to writes, and reads go on.
func TestReadOnlyWhileOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ro.db")
	s := openAt(t, path, sqlitestore.Options{})
	eng := engineOn(t, s)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
	// query_only on the writer is what a read-only file answers a write
	// with (SQLITE_READONLY), on a file this process keeps open.
	_, err = s.DB().ExecContext(ctx, "PRAGMA query_only = 1")
	require.NoError(t, err)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.Error(t, err)
	assert.ErrorIs(t, err, jobstate.ErrUnavailable)
	assert.ErrorIs(t, err, sqlitestore.ErrReadOnly)
	got, err := eng.Get(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, c.Job.ID, got.ID)
	_, err = s.DB().ExecContext(ctx, "PRAGMA query_only = 0")
	require.NoError(t, err)
	_, err = eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name})
	require.NoError(t, err)
}

// TestReopen: jobs, histories, executions and keys survive closing and
// opening the file again; Open migrates once.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "re.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	require.NoError(t, err)
	eng := engineOn(t, s)
	c, err := eng.Create(ctx, jobstate.NewJob{Machine: crashmachine.Name, Key: "k", Payload: []byte("p")})
	require.NoError(t, err)
	cl, err := eng.Claim(ctx, jobstate.ClaimRequest{Machine: crashmachine.Name, Worker: "w"})
	require.NoError(t, err)
	done, err := eng.Succeed(ctx, cl.Lease, jobstate.CommitInput{Result: []byte("r")})
	require.NoError(t, err)
	wantHist, err := s.History(ctx, c.Job.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s2 := openAt(t, path, sqlitestore.Options{})
	applied, err := sqlitestore.Migrate(ctx, s2.DB())
	require.NoError(t, err)
	assert.Empty(t, applied, "the schema is current")
	got, err := s2.Get(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, done, got)
	hist, err := s2.History(ctx, c.Job.ID)
	require.NoError(t, err)
	assert.Equal(t, wantHist, hist)
	again, err := engineOn(t, s2).Create(ctx, jobstate.NewJob{Machine: crashmachine.Name, Key: "k", Payload: []byte("p")})
	require.NoError(t, err)
	assert.True(t, again.Existing)
	assert.Equal(t, c.Job.ID, again.Job.ID)
}

// TestSchemaTooNew: a file migrated by a newer release is refused and
// left as it is.
func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, "INSERT INTO jobstate_migrations (version, name) VALUES (?, 'future')", sqlitestore.SchemaVersion+1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = sqlitestore.Open(ctx, path, sqlitestore.Options{})
	require.ErrorIs(t, err, sqlitestore.ErrSchemaTooNew)
}

// TestOpenRefusals: bad arguments are refused with ErrInvalidArgument.
func TestOpenRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for name, c := range map[string]struct {
		path string
		opts sqlitestore.Options
	}{
		"empty path":  {"", sqlitestore.Options{}},
		"readers":     {filepath.Join(dir, "a.db"), sqlitestore.Options{Readers: -1}},
		"synchronous": {filepath.Join(dir, "b.db"), sqlitestore.Options{Synchronous: "OFF"}},
		"page count":  {filepath.Join(dir, "c.db"), sqlitestore.Options{MaxPageCount: -1}},
	} {
		_, err := sqlitestore.Open(ctx, c.path, c.opts)
		assert.ErrorIs(t, err, jobstate.ErrInvalidArgument, name)
	}
	_, err := sqlitestore.Migrate(ctx, nil)
	assert.ErrorIs(t, err, jobstate.ErrInvalidArgument)
}
