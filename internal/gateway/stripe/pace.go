package stripe

import (
	"context"
	"net/http"

	"golang.org/x/time/rate"
)

// The client keeps its requests within Config.RateLimit, its share of the
// account's rate limit, so that Stripe is not asked what it would answer
// 429: the calls that make an operation (Charge, Refund, and the
// retrievals they make) take four fifths of it, and everything else
// (lookups, fences, ledger pages) the fifth left, so that a backlog of
// operations to reconcile never holds up new payments. A request waits for
// its turn within its context's deadline; one that cannot have it in time
// fails as a request that was never sent, and is asked again later.

// callKey marks the context of a call that makes an operation.
type callKey struct{}

// asCall marks ctx as a call's, paced with the calls.
func asCall(ctx context.Context) context.Context { return context.WithValue(ctx, callKey{}, true) }

// pacer is a RoundTripper that waits for each request's turn, a call's or
// another's, before next sends it.
type pacer struct {
	next        http.RoundTripper
	calls, rest *rate.Limiter
}

// paced paces next at perSecond requests a second.
func paced(next http.RoundTripper, perSecond float64) http.RoundTripper {
	return &pacer{next: next, calls: rate.NewLimiter(rate.Limit(perSecond*4/5), 1),
		rest: rate.NewLimiter(rate.Limit(perSecond/5), 1)}
}

// RoundTrip implements http.RoundTripper.
func (p *pacer) RoundTrip(r *http.Request) (*http.Response, error) {
	turn := p.rest
	if r.Context().Value(callKey{}) != nil {
		turn = p.calls
	}
	if err := turn.Wait(r.Context()); err != nil {
		return nil, err
	}
	return p.next.RoundTrip(r)
}
