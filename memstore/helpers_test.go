package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobstate/jobstate"
)

// sec returns the tests' reference instant, 2026-01-01, plus n seconds.
func sec(n int) time.Time {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
}

// readyJob returns version 1 of a ready job of machine m.
func readyJob(m string, created time.Time) jobstate.Job {
	return jobstate.Job{ID: uuid.New(), Machine: m, State: "q", Kind: jobstate.KindReady, Version: 1, CreatedAt: created, UpdatedAt: created}
}

// terminalJob returns version 1 of a job of machine m completed at done.
func terminalJob(m string, done time.Time) jobstate.Job {
	return jobstate.Job{ID: uuid.New(), Machine: m, State: "done", Kind: jobstate.KindTerminal, Outcome: jobstate.OutcomeSucceeded,
		Version: 1, CreatedAt: done, UpdatedAt: done, CompletedAt: done}
}

// creation is the write that creates j, with its one record.
func creation(j jobstate.Job) jobstate.Write {
	return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: j.Version, Event: jobstate.EventCreate, To: j.State, At: j.CreatedAt}}}
}

// put stores j as it is, with its key if it has one.
func put(t testing.TB, s *Store, j jobstate.Job) jobstate.Job {
	t.Helper()
	got, created, err := s.Create(context.Background(), j.Machine, j.IdempotencyKey, func(context.Context, *jobstate.Job) (jobstate.Write, error) {
		return creation(j), nil
	})
	if err != nil || !created {
		t.Fatalf("create %s: created %v, %v", j.ID, created, err)
	}
	return got
}

// change writes the next version of job id as edit makes it, with one
// record.
func change(t testing.TB, s *Store, id uuid.UUID, edit func(j *jobstate.Job)) jobstate.Job {
	t.Helper()
	got, err := s.Update(context.Background(), id, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		j := cur.Job
		j.Version++
		edit(&j)
		return jobstate.Write{Job: j, Transitions: []jobstate.Transition{{JobID: j.ID, Version: j.Version, From: cur.Job.State, Event: "go", To: j.State}}}, nil
	})
	if err != nil {
		t.Fatalf("update %s: %v", id, err)
	}
	return got
}

// offered returns the ids ClaimNext offers, in order, when its function
// skips every candidate.
func offered(t testing.TB, s *Store, machine string, now time.Time) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	_, err := s.ClaimNext(context.Background(), jobstate.ClaimQuery{Machine: machine, Now: now}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		ids = append(ids, cur.Job.ID)
		return jobstate.Write{}, jobstate.ErrSkip
	})
	if err == nil {
		t.Fatal("a claim whose function skips every job took one")
	}
	return ids
}

// claim claims the first job offered, making it active, and returns its
// id, or uuid.Nil when there is none.
func claim(t testing.TB, s *Store, machine string, now time.Time) uuid.UUID {
	t.Helper()
	job, err := s.ClaimNext(context.Background(), jobstate.ClaimQuery{Machine: machine, Now: now}, func(_ context.Context, cur jobstate.Snapshot) (jobstate.Write, error) {
		j := cur.Job
		j.Version++
		j.State, j.Kind = "run", jobstate.KindActive
		return jobstate.Write{Job: j}, nil
	})
	if err != nil {
		return uuid.Nil
	}
	return job.ID
}
