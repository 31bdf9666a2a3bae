package jobstate

import (
	"fmt"
	"unicode/utf8"
)

// The limits of the texts the engine records. Every store keeps texts
// within them exactly, so that a job accepted by one store is accepted by
// every other; an operation given a text beyond them is refused with
// ErrInvalidArgument and changes nothing.
//
// A name or key (the first three limits) must be valid UTF-8 without the
// NUL character (U+0000), at most the given number of bytes long; the
// empty string means "none" where a field is optional. Error texts are
// never refused, since refusing a failure would leave its execution
// running: they are recorded as CleanErrorText makes them.
const (
	// MaxNameBytes bounds the names a definition declares: its machine
	// name, state names, event names and effect names.
	MaxNameBytes = 128
	// MaxKeyBytes bounds the identifiers a job or an operation carries:
	// NewJob.Key, NewJob.Fingerprint, NewJob.Owner, NewJob.ConcurrencyKey, a worker's name
	// (ClaimRequest.Worker, RecoverWorker), an actor (Call.Actor,
	// NewJob.Actor), and the Owner and Key filters of a ListQuery.
	MaxKeyBytes = 512
	// MaxReasonBytes bounds a reason given with an operation (Call.Reason,
	// NewJob.Reason).
	MaxReasonBytes = 4096
	// MaxErrorBytes bounds a recorded error text (Job.LastError,
	// Execution.Error): a longer one is cut by CleanErrorText.
	MaxErrorBytes = 4096
)

// checkText refuses s, a text given for the named field, when it is not
// valid UTF-8, holds a NUL character, or is longer than limit bytes.
func checkText(field, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%w: %s is %d bytes long, above the limit of %d", ErrInvalidArgument, field, len(s), limit)
	}
	if problem := textProblem(s); problem != "" {
		return fmt.Errorf("%w: %s %s", ErrInvalidArgument, field, problem)
	}
	return nil
}

// textProblem says what makes s unfit to be recorded ("is not valid
// UTF-8", "holds a NUL character"), or "" when nothing does.
func textProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return "holds a NUL character"
		}
	}
	return ""
}

// nameProblem says what makes a name declared by a definition invalid, or
// "" when nothing does.
func nameProblem(s string) string {
	if len(s) > MaxNameBytes {
		return fmt.Sprintf("is %d bytes long, above the limit of %d", len(s), MaxNameBytes)
	}
	return textProblem(s)
}

// CleanErrorText returns the text under which an error message is
// recorded: every byte that is not part of a valid UTF-8 sequence, and
// every NUL character, is replaced by U+FFFD (the replacement character);
// a result longer than MaxErrorBytes is cut at the last character boundary
// that leaves room for "…" (U+2026), which is appended. A text that is
// valid, NUL-free and short enough is returned as it is.
func CleanErrorText(s string) string {
	if len(s) <= MaxErrorBytes && textProblem(s) == "" {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 {
			r = utf8.RuneError
		}
		b = utf8.AppendRune(b, r)
		i += size
	}
	if len(b) <= MaxErrorBytes {
		return string(b)
	}
	const ellipsis = "…"
	cut := MaxErrorBytes - len(ellipsis)
	for !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + ellipsis
}

// checkTexts refuses a NewJob whose key, fingerprint, owner, actor or
// reason is beyond the text limits.
func (nj *NewJob) checkTexts() error {
	for _, f := range []struct {
		name, s string
		limit   int
	}{
		{"key", nj.Key, MaxKeyBytes},
		{"fingerprint", nj.Fingerprint, MaxKeyBytes},
		{"owner", nj.Owner, MaxKeyBytes},
		{"concurrency key", nj.ConcurrencyKey, MaxKeyBytes},
		{"actor", nj.Actor, MaxKeyBytes},
		{"reason", nj.Reason, MaxReasonBytes},
	} {
		if err := checkText(f.name, f.s, f.limit); err != nil {
			return err
		}
	}
	return nil
}

// check refuses a Call whose actor or reason is beyond the text limits.
func (c *Call) check() error {
	if err := checkText("actor", c.Actor, MaxKeyBytes); err != nil {
		return err
	}
	return checkText("reason", c.Reason, MaxReasonBytes)
}
