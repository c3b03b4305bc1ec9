package operation

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// State is a status an operation of a kind ends in once its processor has
// answered: as its rows store it and the API shows it, whether the
// processor did what was asked, how the key's final response renders and
// the event that entering it stages. A kind declares its own (Declared's
// WithStates), or has DefaultStates; the machinery reads nothing else, so
// a status a kind does not declare is an error wherever it is read, never
// taken for a failure.
type State struct {
	// Status is the status, lower-case words joined by underscores, never
	// processing (the status of every operation before its outcome).
	Status string
	// Succeeded is whether the processor did what was asked.
	Succeeded bool
	// Answer is the status of the final response: 201 or 202 for a state
	// that succeeded (the operation with it), 402 for one that failed (a
	// problem carrying it; 502 when the service gave up on it, whatever its
	// state).
	Answer int
	// Event is the type of the event that entering the state stages:
	// <type>.<word>, and <type>.<status> when WithStates finds it empty.
	Event string
	// Waiting marks a success the processor has not finished (a payout in
	// transit, an authorization awaiting capture): the key's final response
	// is the state's, and a later answer of the processor (its webhook)
	// moves the operation on, to another state, with that state's event.
	// Every other state is final, but for Reversible.
	Waiting bool
	// Reversible marks a success the processor may still undo (a refund
	// that fails after it succeeded, as Stripe's can): a later answer of
	// the processor that the operation failed moves it on, to that state,
	// with its event, as from a waiting state.
	Reversible bool
	// Parent is the type of an event about the operation's parent (the
	// operation of another kind it changes: the payment a refund refunds)
	// that entering the state stages too, after its own:
	// <parent's type>.<word>, "payment.refunded" say; empty for none. The
	// kind's Final then reads the parent, as its event carries it
	// (Final.Parent), in the same transaction.
	Parent string
}

// eventPattern is what an event's type may be: <type>.<word>.
var eventPattern = regexp.MustCompile(`^[a-z]+(_[a-z]+)*\.[a-z]+(_[a-z]+)*$`)

// DefaultStates are the states of a kind that declares none: succeeded
// (201, <type>.succeeded) and failed (402, <type>.failed).
func DefaultStates(n Names) []State {
	return []State{
		{Status: StatusSucceeded, Succeeded: true, Answer: http.StatusCreated, Event: n.Type + "." + StatusSucceeded},
		{Status: StatusFailed, Answer: http.StatusPaymentRequired, Event: n.Type + "." + StatusFailed},
	}
}

// StateOf is the state of kind k named status; an error for a status k
// does not declare.
func StateOf(k Kind, status string) (State, error) { return stateOf(k.Names(), k.States(), status) }

func stateOf(n Names, states []State, status string) (State, error) {
	if i := slices.IndexFunc(states, func(st State) bool { return st.Status == status }); i >= 0 {
		return states[i], nil
	}
	return State{}, fmt.Errorf("%s: status %q is not one of its declared states", n.Type, status)
}

// stateFor is the state an outcome puts an operation of kind k in: the
// one it names, which must agree with its Succeeded, else the first of k's
// final states that succeeded, or failed, as it did.
func stateFor(k Kind, out Outcome) (State, error) {
	if out.Status != "" {
		st, err := StateOf(k, out.Status)
		if err == nil && (st.Succeeded != out.Succeeded || out.Waiting && !st.Waiting) {
			err = fmt.Errorf("%s: an outcome in state %s says succeeded %t, waiting %t", k.Names().Type, st.Status, out.Succeeded, out.Waiting)
		}
		return st, err
	}
	i := slices.IndexFunc(k.States(), func(st State) bool { return st.Succeeded == out.Succeeded && st.Waiting == out.Waiting })
	if i < 0 {
		// checkStates: k declares a final state of each; a waiting one only
		// when its processor settles it by webhook (Processor.Check).
		return State{}, fmt.Errorf("%s: an outcome that waits, but the kind declares no state that waits", k.Names().Type)
	}
	return k.States()[i], nil
}

// EventTypes are the events kind k's operations stage about themselves,
// one a state, in the order its states are declared.
func EventTypes(k Kind) []string {
	var types []string
	for _, st := range k.States() {
		if !slices.Contains(types, st.Event) {
			types = append(types, st.Event)
		}
	}
	return types
}

// parentEventTypes are the events kind k's operations stage about their
// parents, in the order its states are declared.
func parentEventTypes(k Kind) []string {
	var types []string
	for _, st := range k.States() {
		if st.Parent != "" && !slices.Contains(types, st.Parent) {
			types = append(types, st.Parent)
		}
	}
	return types
}

// checkStates refuses states the machinery cannot read: a status that is
// not a name or is processing, one declared twice, an answer that does not
// fit whether it succeeded, an event that is not the kind's, a waiting
// state that failed, a parent's event of the kind's own type, and a kind without a final state that succeeded and
// one that failed (the outcomes every processor can answer).
func checkStates(n Names, states []State) error {
	var succeeds, fails bool
	for i, st := range states {
		word, ok := strings.CutPrefix(st.Event, n.Type+".")
		switch {
		case !namePattern.MatchString(st.Status) || st.Status == StatusProcessing:
			return fmt.Errorf("%s: state %q must be lower-case words, and not %s", n.Type, st.Status, StatusProcessing)
		case slices.ContainsFunc(states[:i], func(o State) bool { return o.Status == st.Status }):
			return fmt.Errorf("%s: state %q is declared twice", n.Type, st.Status)
		case st.Succeeded && st.Answer != http.StatusCreated && st.Answer != http.StatusAccepted:
			return fmt.Errorf("%s: state %s succeeded, so it answers 201 or 202, not %d", n.Type, st.Status, st.Answer)
		case !st.Succeeded && st.Answer != http.StatusPaymentRequired:
			return fmt.Errorf("%s: state %s failed, so it answers 402, not %d", n.Type, st.Status, st.Answer)
		case !ok || !namePattern.MatchString(word):
			return fmt.Errorf("%s: state %s stages event %q, which is not %s.<word>", n.Type, st.Status, st.Event, n.Type)
		case st.Waiting && !st.Succeeded:
			return fmt.Errorf("%s: state %s waits, so it succeeded so far", n.Type, st.Status)
		case st.Parent != "" && !eventPattern.MatchString(st.Parent):
			return fmt.Errorf("%s: state %s stages parent event %q, which is not <type>.<word>", n.Type, st.Status, st.Parent)
		case strings.HasPrefix(st.Parent, n.Type+"."):
			return fmt.Errorf("%s: state %s stages %q about its parent, but that is an event of its own type", n.Type, st.Status, st.Parent)
		}
		succeeds, fails = succeeds || st.Succeeded && !st.Waiting, fails || !st.Succeeded
	}
	if !succeeds || !fails {
		return fmt.Errorf("%s: declares no final state that succeeded, or none that failed", n.Type)
	}
	return nil
}
