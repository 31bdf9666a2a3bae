package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jobstate/jobstate/internal/assert"
	"github.com/jobstate/jobstate/internal/require"

	"github.com/jobstate/jobstate"
)

// safeErr is an error pgconn would call safe to retry (nothing was sent).
type safeErr struct{}

func (safeErr) Error() string     { return "conn closed" }
func (safeErr) SafeToRetry() bool { return true }

// connectError returns a real failure to connect: to a loopback port
// nothing listens on.
func connectError(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().(*net.TCPAddr)
	require.NoError(t, l.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pgconn.Connect(ctx, fmt.Sprintf("postgres://u@127.0.0.1:%d/db?sslmode=disable&connect_timeout=5", addr.Port))
	var ce *pgconn.ConnectError
	require.ErrorAs(t, err, &ce)
	return err
}

// TestWrapErrClassifies checks every branch of the store's mapping of
// driver errors, inside a transaction and at its COMMIT, with the
// caller's context live and ended.
func TestWrapErrClassifies(t *testing.T) {
	type want int
	const (
		nothingApplied want = iota // *UnavailableError, MayHaveApplied false
		mayHaveApplied             // *UnavailableError, MayHaveApplied true
		callersContext             // the caller's context error, not ErrUnavailable
		plain                      // wrapped, no sentinel of this mapping
	)
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code} }
	conflict := &pgconn.PgError{Code: "23514", ConstraintName: "jobs_one_commit"}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	connect := connectError(t)
	decode := errors.New("cannot scan int8 into *string")
	timeout := fmt.Errorf("timeout: %w", context.DeadlineExceeded)

	cases := []struct {
		name  string
		err   error
		ended bool // the caller's context is cancelled
		ph    phase
		want  want
		is    error // a sentinel the error must match, for refusals
	}{
		// The server's definite refusals, in either phase.
		{name: "duplicate id", err: &pgconn.PgError{Code: "23505", ConstraintName: "jobs_pkey"}, ph: atCommit, want: plain, is: jobstate.ErrDuplicateJob},
		{name: "version guard", err: &pgconn.PgError{Code: "22012"}, ph: atCommit, want: plain, is: jobstate.ErrVersionConflict},
		{name: "second commit", err: conflict, ph: atCommit, want: plain, is: jobstate.ErrAlreadyCommitted},
		{name: "repeated effect", err: &pgconn.PgError{Code: "23505", ConstraintName: "effects_pkey"}, want: plain, is: jobstate.ErrEffectApplied},
		{name: "history version", err: &pgconn.PgError{Code: "23505", ConstraintName: "transitions_pkey"}, want: plain, is: jobstate.ErrVersionConflict},
		{name: "check", err: pg("23514"), want: plain, is: jobstate.ErrInvalidArgument},
		{name: "index row too large", err: pg("54000"), ph: atCommit, want: plain, is: jobstate.ErrInvalidArgument},
		{name: "bad characters", err: pg("22021"), want: plain, is: jobstate.ErrInvalidArgument},
		{name: "serialization failure at commit", err: pg("40001"), ph: atCommit, want: plain},
		{name: "commit answered rollback", err: pgx.ErrTxCommitRollback, ph: atCommit, want: plain},
		{name: "statement cancelled", err: pg("57014"), ended: true, ph: atCommit, want: callersContext},
		{name: "other server error", err: pg("42P01"), want: plain},

		// Connection and shutdown errors of the server.
		{name: "terminated in transaction", err: pg("57P01"), want: nothingApplied},
		{name: "terminated at commit", err: pg("57P01"), ph: atCommit, want: mayHaveApplied},
		{name: "crash shutdown at commit", err: pg("57P02"), ph: atCommit, want: mayHaveApplied},
		{name: "cannot connect now", err: pg("57P03"), want: nothingApplied},
		{name: "connection failure", err: pg("08006"), want: nothingApplied},
		{name: "connection failure at commit", err: pg("08006"), ph: atCommit, want: mayHaveApplied},
		{name: "terminated at commit, context ended", err: pg("57P01"), ended: true, ph: atCommit, want: mayHaveApplied},
		{name: "terminated in transaction, context ended", err: pg("57P01"), ended: true, want: callersContext},

		// Failures to connect, and errors before anything was sent.
		{name: "connect", err: connect, want: nothingApplied},
		{name: "connect at commit", err: connect, ph: atCommit, want: nothingApplied},
		{name: "safe to retry", err: safeErr{}, want: nothingApplied},
		{name: "safe to retry at commit", err: fmt.Errorf("batch: %w", safeErr{}), ph: atCommit, want: nothingApplied},
		{name: "refused", err: refused, want: nothingApplied},

		// The connection lost.
		{name: "EOF", err: io.EOF, want: nothingApplied},
		{name: "EOF at commit", err: io.EOF, ph: atCommit, want: mayHaveApplied},
		{name: "unexpected EOF at commit", err: fmt.Errorf("receive message failed: %w", io.ErrUnexpectedEOF), ph: atCommit, want: mayHaveApplied},
		{name: "reset", err: reset, want: nothingApplied},
		{name: "reset at commit", err: reset, ph: atCommit, want: mayHaveApplied},
		{name: "closed", err: net.ErrClosed, ph: atCommit, want: mayHaveApplied},
		{name: "reset, context ended", err: reset, ended: true, want: callersContext},
		{name: "reset at commit, context ended", err: reset, ended: true, ph: atCommit, want: mayHaveApplied},

		// Contexts.
		{name: "caller's context", err: context.Canceled, ended: true, want: callersContext},
		{name: "caller's context, before sending", err: &safeCtxErr{context.Canceled}, ended: true, ph: atCommit, want: callersContext},
		{name: "caller's context, autocommit sent", err: context.Canceled, ended: true, ph: atCommit, want: mayHaveApplied},
		{name: "store's timeout", err: timeout, want: nothingApplied},
		{name: "commit timeout", err: timeout, ph: atCommit, want: mayHaveApplied},

		// Errors of the client, not of the server or the connection.
		{name: "decode", err: decode, want: plain},
		{name: "decode at commit", err: decode, ph: atCommit, want: mayHaveApplied},
		{name: "decode, context ended", err: decode, ended: true, want: callersContext},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.ended {
				cancel()
			}
			got := wrapErr(ctx, "update: locking the job", tc.err, tc.ph)
			require.Error(t, got)
			assert.ErrorIs(t, got, tc.err, "the driver's error is kept")
			var ue *jobstate.UnavailableError
			isUE := errors.As(got, &ue)
			switch tc.want {
			case nothingApplied, mayHaveApplied:
				require.True(t, isUE, "%v", got)
				assert.ErrorIs(t, got, jobstate.ErrUnavailable)
				assert.Equal(t, "update", ue.Op)
				assert.Equal(t, tc.want == mayHaveApplied, ue.MayHaveApplied, "%v", got)
				assert.Equal(t, tc.want == mayHaveApplied, errors.Is(got, jobstate.ErrOutcomeUnknown))
				assert.Equal(t, tc.err, ue.Err)
			case callersContext:
				assert.False(t, isUE, "%v", got)
				assert.ErrorIs(t, got, context.Canceled)
				assert.NotErrorIs(t, got, jobstate.ErrOutcomeUnknown)
			case plain:
				assert.False(t, isUE, "%v", got)
				assert.NotErrorIs(t, got, jobstate.ErrOutcomeUnknown)
				assert.Contains(t, got.Error(), "pgstore: update: locking the job: ")
			}
			if tc.is != nil {
				assert.ErrorIs(t, got, tc.is)
			}
		})
	}
}

// safeCtxErr is pgconn's error for a context that ended before anything
// was sent: safe to retry, and the context's error.
type safeCtxErr struct{ err error }

func (e *safeCtxErr) Error() string     { return "context already done: " + e.err.Error() }
func (e *safeCtxErr) SafeToRetry() bool { return true }
func (e *safeCtxErr) Unwrap() error     { return e.err }

// TestCommitPhase: a server error that answered a statement before the
// COMMIT is definite; any other error of a batch holding a COMMIT may
// have come after it ran.
func TestCommitPhase(t *testing.T) {
	terminated := fmt.Errorf("batch: %w", &pgconn.PgError{Code: "57P01"})
	assert.Equal(t, inTransaction, commitPhase(terminated, false))
	assert.Equal(t, atCommit, commitPhase(terminated, true))
	assert.Equal(t, atCommit, commitPhase(io.ErrUnexpectedEOF, false))
	assert.Equal(t, atCommit, commitPhase(io.ErrUnexpectedEOF, true))
}

// TestBodyErrorWithoutConnection: a function's error is kept as it is
// when there is no connection to have been lost (a caller's nil
// transaction), or the caller's context ended.
func TestBodyErrorWithoutConnection(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, io.EOF, bodyError(ctx, "update", nil, io.EOF))
	ended, cancel := context.WithCancel(ctx)
	cancel()
	assert.Equal(t, io.EOF, bodyError(ended, "update", nil, io.EOF))
	ue := &jobstate.UnavailableError{Op: "create", Err: io.EOF}
	assert.Same(t, ue, bodyError(ctx, "update", nil, ue))
}
