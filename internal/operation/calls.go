package operation

import (
	"context"
	"errors"
	"time"
)

// Calls are a processor's calls for one kind of operation, R being what the
// kind's call sends: its adapter (under internal/gateway) makes them, and
// has Find, Close and Ledger exactly where its declaration says it has a
// lookup, a fence and a ledger (Processor.Check). A kind embeds the Calls
// it is given, and binds them to what each operation sends (Bind).
type Calls[R any] struct {
	// Make makes the object once per downstream key, or returns the one
	// already made under it: a decline, or any other definite refusal, is an
	// Outcome that did not succeed, not an error; an unknown outcome wraps
	// ErrProcessorUnknown, a closed key ErrKeyClosed, a request the
	// processor did not execute ErrNotSent.
	Make func(ctx context.Context, req R) (Outcome, error)
	// Find is the lookup (Pending.Find), given what Make sends.
	Find func(ctx context.Context, req R) (Outcome, bool, error)
	// Close is the fence (Pending.Close), given what Make sends.
	Close func(ctx context.Context, req R) (Outcome, bool, error)
	// Ledger is one page of the processor's ledger of the kind (Kind.LedgerPage).
	Ledger func(ctx context.Context, since time.Time, cursor string) ([]LedgerEntry, string, error)
}

// Bind sets p's calls to c's, each sending req: Make, and Find and Close
// where c has them.
func (c Calls[R]) Bind(p *Pending, req R) {
	p.Make = func(ctx context.Context) (Outcome, error) { return c.Make(ctx, req) }
	if c.Find != nil {
		p.Find = func(ctx context.Context) (Outcome, bool, error) { return c.Find(ctx, req) }
	}
	if c.Close != nil {
		p.Close = func(ctx context.Context) (Outcome, bool, error) { return c.Close(ctx, req) }
	}
}

// Has implements Kind: which calls c has.
func (c Calls[R]) Has() Has {
	return Has{Make: c.Make != nil, Find: c.Find != nil, Close: c.Close != nil, Ledger: c.Ledger != nil}
}

// LedgerPage implements Kind: one page of c's ledger, or ErrNoLedger.
func (c Calls[R]) LedgerPage(ctx context.Context, since time.Time, cursor string) ([]LedgerEntry, string, error) {
	if c.Ledger == nil {
		return nil, "", ErrNoLedger
	}
	return c.Ledger(ctx, since, cursor)
}

// Has is which of its processor calls a kind has.
type Has struct {
	Make, Find, Close, Ledger bool
}

// CallNames are the names of a kind's processor calls, derived from its
// processor object, as their timings name them (Registry.Timed): for a
// payment, whose object is a charge, charge, find_charge, close_charge and
// ledger_charges.
type CallNames struct {
	// Make is the one call that makes the object (Pending.Make): <object>.
	Make string
	// Find is Pending.Find: find_<object>.
	Find string
	// Close is Pending.Close, the fence: close_<object>.
	Close string
	// Ledger is Kind.LedgerPage: ledger_<object>s.
	Ledger string
}

// CallNames are the names of the kind's processor calls.
func (n Names) CallNames() CallNames {
	return CallNames{Make: n.Object, Find: "find_" + n.Object, Close: "close_" + n.Object, Ledger: "ledger_" + n.Object + "s"}
}

// All lists the calls.
func (c CallNames) All() []string { return []string{c.Make, c.Find, c.Close, c.Ledger} }

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
		calls = append(calls, k.Names().CallNames().All()...)
	}
	return calls
}

// Timed is a registry of r's kinds, in r's order, each of whose processor
// calls is timed by t under its name (Names.CallNames): Pending.Make,
// Pending.Find and Pending.Close, as Load binds them, and Kind.LedgerPage. The machinery makes every
// processor call through a kind of its registry, so a kind's calls are timed
// without its naming them. Everything else of a kind is its own.
func (r *Registry) Timed(t CallTimer) *Registry {
	kinds := make([]Kind, len(r.kinds))
	for i, k := range r.kinds {
		kinds[i] = timedKind{Kind: k, calls: k.Names().CallNames(), timer: t}
	}
	return MustRegistry(kinds...)
}

// timedKind is a Kind whose processor calls its timer times. The Kind
// methods that make no processor call are the kind's own, promoted.
type timedKind struct {
	Kind
	calls CallNames
	timer CallTimer
}

// time tells the timer of call, begun at start, as it returns *err; deferred
// by each call, as defer k.time(ctx, name, time.Now(), &err).
func (k timedKind) time(ctx context.Context, call string, start time.Time, err *error) {
	k.timer.Called(ctx, call, CallOutcome(*err), time.Since(start))
}

// timeCalls times p's Make, Find and Close, as Load binds them (those its
// processor has).
func (k timedKind) timeCalls(p *Pending) {
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
}

// LedgerPage implements Kind.
func (k timedKind) LedgerPage(ctx context.Context, since time.Time, cursor string) (_ []LedgerEntry, _ string, err error) {
	defer k.time(ctx, k.calls.Ledger, time.Now(), &err)
	return k.Kind.LedgerPage(ctx, since, cursor)
}
