package operation

import (
	"context"
	"errors"
	"time"

	"github.com/example/payments/internal/database"
)

// Calls are the names of a kind's processor calls, derived from its
// processor object, as their timings name them (Registry.Timed): for a
// payment, whose object is a charge, charge, find_charge, close_charge and
// ledger_charges.
type Calls struct {
	// Make is the one call that makes the object (Pending.Make): <object>.
	Make string
	// Find is Pending.Find: find_<object>.
	Find string
	// Close is Pending.Close, the fence: close_<object>.
	Close string
	// Ledger is Kind.Ledger, one page: ledger_<object>s.
	Ledger string
}

// Calls are the names of the kind's processor calls.
func (n Names) Calls() Calls {
	return Calls{Make: n.Object, Find: "find_" + n.Object, Close: "close_" + n.Object, Ledger: "ledger_" + n.Object + "s"}
}

// All lists the calls.
func (c Calls) All() []string { return []string{c.Make, c.Find, c.Close, c.Ledger} }

// The outcomes of a processor call, as its timing names them.
const (
	// CallOK is a call that returned no error: a definite answer, a decline
	// or a refusal included.
	CallOK = "ok"
	// CallUnknown is a call whose outcome is not known (an error wrapping
	// ErrProcessorUnknown: a timeout, a lost connection, a 5xx, 409 or 429,
	// an unreadable answer), asked again later.
	CallUnknown = "unknown_outcome"
	// CallNotSent is a call the processor did not execute (ErrNotSent: a
	// 429, or no turn under its rate limit).
	CallNotSent = "not_sent"
	// CallError is a call that failed otherwise: a closed key, a request
	// refused before it was sent.
	CallError = "error"
)

// CallOutcomes lists every outcome of a call, for metrics that start at
// zero.
var CallOutcomes = []string{CallOK, CallUnknown, CallNotSent, CallError}

// CallOutcome is the outcome of a call that returned err.
func CallOutcome(err error) string {
	switch {
	case err == nil:
		return CallOK
	case errors.Is(err, ErrNotSent):
		return CallNotSent
	case errors.Is(err, ErrProcessorUnknown):
		return CallUnknown
	}
	return CallError
}

// CallTimer times the processor calls of a Registry's kinds
// (Registry.Timed).
type CallTimer interface {
	// Called is told of each call as it returns: its name (one of
	// Registry.Calls), its outcome (one of CallOutcomes) and how long it
	// took. ctx is the call's own, with its span.
	Called(ctx context.Context, call, outcome string, d time.Duration)
}

// Calls lists every call of every kind, for metrics that start at zero.
func (r *Registry) Calls() []string {
	var calls []string
	for _, k := range r.kinds {
		calls = append(calls, k.Names().Calls().All()...)
	}
	return calls
}

// Timed is a registry of r's kinds, in r's order, each of whose processor
// calls is timed by t under its name (Names.Calls): Pending.Make,
// Pending.Find and Pending.Close, as Load sets them, and Kind.Ledger. The machinery makes every
// processor call through a kind of its registry, so a kind's calls are timed
// without its naming them. Everything else of a kind is its own.
func (r *Registry) Timed(t CallTimer) *Registry {
	kinds := make([]Kind, len(r.kinds))
	for i, k := range r.kinds {
		kinds[i] = timedKind{Kind: k, calls: k.Names().Calls(), timer: t}
	}
	return MustRegistry(kinds...)
}

// timedKind is a Kind whose processor calls its timer times. The Kind
// methods that make no processor call are the kind's own, promoted.
type timedKind struct {
	Kind
	calls Calls
	timer CallTimer
}

// time tells the timer of call, begun at start, as it returns *err; deferred
// by each call, as defer k.time(ctx, name, time.Now(), &err).
func (k timedKind) time(ctx context.Context, call string, start time.Time, err *error) {
	k.timer.Called(ctx, call, CallOutcome(*err), time.Since(start))
}

// Load implements Kind: the kind's Load, its Make, Find and Close timed
// (those its processor has).
func (k timedKind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (Pending, error) {
	p, err := k.Kind.Load(ctx, db, id, deadline)
	if err != nil {
		return p, err
	}
	if made := p.Make; made != nil {
		p.Make = func(ctx context.Context) (_ Outcome, err error) {
			defer k.time(ctx, k.calls.Make, time.Now(), &err)
			return made(ctx)
		}
	}
	if find := p.Find; find != nil {
		p.Find = func(ctx context.Context) (_ Outcome, _ bool, err error) {
			defer k.time(ctx, k.calls.Find, time.Now(), &err)
			return find(ctx)
		}
	}
	if closeKey := p.Close; closeKey != nil {
		p.Close = func(ctx context.Context) (_ Outcome, _ bool, err error) {
			defer k.time(ctx, k.calls.Close, time.Now(), &err)
			return closeKey(ctx)
		}
	}
	return p, nil
}

// Ledger implements Kind.
func (k timedKind) Ledger(ctx context.Context, since time.Time, cursor string) (_ []LedgerEntry, _ string, err error) {
	defer k.time(ctx, k.calls.Ledger, time.Now(), &err)
	return k.Kind.Ledger(ctx, since, cursor)
}
