package stripe

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// The client keeps its requests within Config.RateLimit, its share of the
// account's rate limit, so that Stripe is not asked what it would answer
// 429. The calls that make an operation (Charge, Refund, and the
// retrievals they make) go first: each waits for its turn, within its
// context's deadline. The lookups and fences of the operations to
// reconcile take a turn only if it comes within lookupWait, and the
// ledger's pages only within ledgerWait: the capacity the calls leave is
// theirs, all of it once the calls are quiet, and a backlog to reconcile,
// or the ledger comparison, never holds up new payments. A request that
// cannot have its turn fails as a request that was never sent, and is
// asked again later.

// share is the kind of work a request's context marks it as.
type share int

const (
	shareLookup share = iota // the default: lookups and fences
	shareCall
	shareLedger
)

// How long a lookup and a ledger page may wait for a turn, behind the
// calls.
const (
	lookupWait = time.Second
	ledgerWait = 100 * time.Millisecond
)

// shareKey marks a context with its share.
type shareKey struct{}

// paceAs marks ctx as sh's.
func paceAs(ctx context.Context, sh share) context.Context {
	return context.WithValue(ctx, shareKey{}, sh)
}

// pacer is a RoundTripper that waits for each request's turn before next
// sends it.
type pacer struct {
	next  http.RoundTripper
	turns *rate.Limiter
}

// paced paces next at perSecond requests a second.
func paced(next http.RoundTripper, perSecond float64) http.RoundTripper {
	return &pacer{next: next, turns: rate.NewLimiter(rate.Limit(perSecond), 1)}
}

// RoundTrip implements http.RoundTripper.
func (p *pacer) RoundTrip(r *http.Request) (*http.Response, error) {
	sh, _ := r.Context().Value(shareKey{}).(share)
	if sh == shareCall {
		if err := p.turns.Wait(r.Context()); err != nil {
			return nil, err
		}
		return p.next.RoundTrip(r)
	}
	wait := lookupWait
	if sh == shareLedger {
		wait = ledgerWait
	}
	turn := p.turns.Reserve()
	if d := turn.Delay(); d > wait {
		turn.Cancel()
		return nil, fmt.Errorf("no turn within %s of the rate limit, behind the calls: not sent", wait)
	}
	timer := time.NewTimer(turn.Delay())
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		turn.Cancel()
		return nil, r.Context().Err()
	}
	return p.next.RoundTrip(r)
}
