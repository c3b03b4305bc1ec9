package operation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Processor is what the processor behind the kinds' calls can do, as its
// adapter declares it (package gateway, and the list of processors in
// package catalog). The machinery reads it and nothing else: a capability
// the processor lacks is a stated absence with its own behaviour, never a
// call that pretends.
type Processor struct {
	// Name is the processor's, as PROCESSOR names it.
	Name string
	// Lookup is how the reconciler learns what was made under a downstream
	// key it has no answer for.
	Lookup Lookup
	// Fence is whether the processor can close a downstream key for good
	// (Pending.Close), so that an operation past its deadline is given up
	// and nothing can ever be made under its key. Without it, an operation
	// past its deadline is never given up: it stays processing, marked, and
	// in the needs-review queue (Reviews.Unfenced) until the processor
	// answers.
	Fence bool
	// Ledger is whether the processor lists what it made (Kind.Ledger).
	// Without it, the ledger comparison is off, and says so.
	Ledger bool
	// LedgerPage is the most entries one ledger page holds, with Ledger.
	LedgerPage int
	// KeyRetention is how long the processor keeps a downstream key after
	// its first use, answering a request made again under it with the
	// first answer; after that, the request is made anew.
	KeyRetention time.Duration
	// ByWebhook lists the kinds (their types) whose operations the
	// processor settles only later, by its webhook: its answer to their call
	// is a waiting outcome (Outcome.Waiting), and the kind declares a state
	// that waits for it. Every other kind's operations settle at once.
	ByWebhook []string
	// RateLimit is the requests a second the processor takes of the
	// account, from every worker together: the default of
	// PROCESSOR_RATE_LIMIT (gateway.Pace). Zero means it declares none.
	RateLimit float64
	// PaymentMethod is the shape of the payment methods the processor takes.
	PaymentMethod Format
	// Amounts is what the processor takes in each currency, checked by the
	// API before a key is spent; nil takes any amount the API does.
	Amounts func(currency string) AmountRule
}

// AmountRule is what the processor takes in one currency, in the API's
// ISO 4217 minor units: a charge of at least Min, and every amount, a
// charge's or a refund's, a multiple of Step. The zero rule takes any
// amount the API does.
type AmountRule struct {
	Min, Step int64
}

// CheckAmount refuses, with the words a client reads, an amount the
// processor would refuse in currency: a charge's (charge true) below the
// minimum, or any amount off the currency's step.
func (p Processor) CheckAmount(currency string, amount int64, charge bool) *FieldError {
	if p.Amounts == nil {
		return nil
	}
	r := p.Amounts(strings.ToUpper(currency))
	switch {
	case charge && amount < r.Min:
		return &FieldError{Field: "amount", Message: fmt.Sprintf("must be at least %d in %s, the processor's (%s) minimum charge, in minor units", r.Min, strings.ToUpper(currency), p.Name)}
	case r.Step > 1 && amount%r.Step != 0:
		return &FieldError{Field: "amount", Message: fmt.Sprintf("must be a multiple of %d in %s: the processor (%s) takes no smaller unit", r.Step, strings.ToUpper(currency), p.Name)}
	}
	return nil
}

// Lookup is how the reconciler learns what was made under a downstream key.
type Lookup string

const (
	// LookupQuery asks the processor (Pending.Find), which answers what was
	// made under the key, or confirms that nothing was.
	LookupQuery Lookup = "query"
	// LookupReplay makes the call again under its key (Pending.Make) while
	// the processor keeps keys (KeyRetention after the operation's
	// creation): it answers with what the first call did, or does it now.
	// Past that, the reconciler waits for the processor's webhook.
	LookupReplay Lookup = "replay"
	// LookupNone waits for the processor's webhook.
	LookupNone Lookup = "none"
)

// Format is the shape of a value the processor takes, such as a payment
// method, for the refusal of one that does not fit.
type Format struct {
	// Pattern is what a value must match.
	Pattern *regexp.Regexp
	// Example is one that does, for the refusal's words.
	Example string
}

// Valid reports whether s has the format's shape.
func (f Format) Valid(s string) bool { return f.Pattern != nil && f.Pattern.MatchString(s) }

// SettlesByWebhook reports whether the processor settles operations of
// resourceType only later, by its webhook.
func (p Processor) SettlesByWebhook(resourceType string) bool {
	return slices.Contains(p.ByWebhook, resourceType)
}

// Check refuses a declaration the machinery cannot run on, against kinds,
// the service's: a lookup it does not know, no key retention, a ledger with
// no page, a payment method with no format, and a kind settled by webhook
// that the service does not have, or that declares no state to wait in.
func (p Processor) Check(kinds *Registry) error {
	switch {
	case p.Name == "":
		return fmt.Errorf("a processor must be named")
	case !slices.Contains([]Lookup{LookupQuery, LookupReplay, LookupNone}, p.Lookup):
		return fmt.Errorf("processor %s: lookup %q is none of %s, %s and %s", p.Name, p.Lookup, LookupQuery, LookupReplay, LookupNone)
	case p.KeyRetention <= 0:
		return fmt.Errorf("processor %s: its key retention must be positive", p.Name)
	case p.Ledger && p.LedgerPage < 1:
		return fmt.Errorf("processor %s: a ledger's largest page must be at least 1", p.Name)
	case p.PaymentMethod.Pattern == nil || !p.PaymentMethod.Valid(p.PaymentMethod.Example):
		return fmt.Errorf("processor %s: its payment method format needs a pattern its example matches", p.Name)
	}
	for _, t := range p.ByWebhook {
		k, err := kinds.Kind(t)
		if err != nil {
			return fmt.Errorf("processor %s settles %s by webhook: %w", p.Name, t, err)
		}
		if !slices.ContainsFunc(k.States(), func(st State) bool { return st.Waiting }) {
			return fmt.Errorf("processor %s settles %s by webhook, but %s declares no state that waits", p.Name, t, t)
		}
	}
	return nil
}

// CheckCalls checks that the processor's adapter makes every kind's call,
// and has a lookup, a fence and a ledger for every kind exactly where p
// declares them (Kind.Has), so that the machinery never calls what the
// processor does not have.
func (p Processor) CheckCalls(kinds *Registry) error {
	for _, k := range kinds.Kinds() {
		has := k.Has()
		for _, c := range []struct {
			what          string
			declared, has bool
		}{
			{"the call", true, has.Make},
			{"a lookup", p.Lookup == LookupQuery, has.Find},
			{"a fence", p.Fence, has.Close},
			{"a ledger", p.Ledger, has.Ledger},
		} {
			if c.declared != c.has {
				return fmt.Errorf("processor %s: it declares %s for %ss %t, and its adapter's calls say %t",
					p.Name, c.what, k.Names().Type, c.declared, c.has)
			}
		}
	}
	return nil
}
