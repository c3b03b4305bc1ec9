package operation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Share is the kind of work a processor request is, as its context carries
// it: the processor's rate limit (gateway.Pace) serves the calls that make
// operations first, then the lookups and fences, then the ledger's pages.
type Share int

const (
	// ShareLookup is the default: a lookup or a fence.
	ShareLookup Share = iota
	// ShareCall is the call that makes an operation (Pending.Make).
	ShareCall
	// ShareLedger is a page of the processor's ledger (Kind.Ledger).
	ShareLedger
)

// shareKey marks a context with its share.
type shareKey struct{}

// WithShare marks ctx as sh's. The machinery marks each request it makes
// through a kind; an adapter marks none.
func WithShare(ctx context.Context, sh Share) context.Context {
	return context.WithValue(ctx, shareKey{}, sh)
}

// ShareOf is the share ctx is marked with: ShareLookup when unmarked.
func ShareOf(ctx context.Context) Share {
	sh, _ := ctx.Value(shareKey{}).(Share)
	return sh
}

// ErrNotSent reports a processor request that was not executed: the
// processor said so (a 429), or its turn under the processor's rate limit
// did not come in time, so it was never sent. Nothing happened under its key
// that a retry could double; an operation's job waits (RetryAfter) and makes
// the call again under the same key without spending an attempt of its
// retry budget. It wraps ErrProcessorUnknown as well, so that a path that
// does not tell the two apart asks again later, as for any unknown outcome.
var ErrNotSent = errors.New("processor request not executed")

// NotSentError is an ErrNotSent, with how long to wait before the next try
// when the processor said (Retry-After) or the pace knows.
type NotSentError struct {
	// RetryAfter is the wait before the next try; zero means the runner's
	// backoff.
	RetryAfter time.Duration
	Err        error
}

// NotSent wraps err, a request that was not executed, in ErrNotSent and
// ErrProcessorUnknown, to be tried again after retryAfter (zero: the
// runner's backoff).
func NotSent(err error, retryAfter time.Duration) error {
	return &NotSentError{RetryAfter: max(retryAfter, 0), Err: err}
}

func (e *NotSentError) Error() string {
	return fmt.Sprintf("%s: %s: %v", ErrNotSent, ErrProcessorUnknown, e.Err)
}

// Unwrap is ErrNotSent, ErrProcessorUnknown and the cause.
func (e *NotSentError) Unwrap() []error { return []error{ErrNotSent, ErrProcessorUnknown, e.Err} }

// RetryAfter is the wait err, an ErrNotSent, asks for before the next try,
// and whether err is one.
func RetryAfter(err error) (time.Duration, bool) {
	var ns *NotSentError
	if !errors.As(err, &ns) {
		return 0, false
	}
	return ns.RetryAfter, true
}
