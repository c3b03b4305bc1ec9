// Package operation is the machinery every idempotent operation of the
// service runs on. An operation (a payment, say) is declared once, as a
// Kind, in its own package; the list of the service's kinds (package
// catalog) is read by everything here:
//
//   - the first phase (Service.Start): one read of the key answers a retry;
//     a new key is one transaction that reserves the key, writes the
//     operation's rows and stages its job in the outbox (package outbox),
//     whose relay moves it to the job queue;
//   - the later phases (Runner): one processor call, whose definite answer
//     is recorded as the key moves to the kind's created point, then the
//     final response and the event in one commit (River completes the job
//     once it returns);
//   - what settles operations the worker could not: the reconciler (a lookup
//     by downstream key, a call made again, or the fence), the sweep, the
//     processor's webhooks, and the comparison of the processor's ledger;
//   - the needs-review queue, the events and their subscribers.
//
// It knows nothing of HTTP, River or the processor's wire format: those are
// behind interfaces (JobQueue, LiveJobs, outbox.Queue), the kinds' own
// processor calls and the responses the kinds render.
package operation

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/idempotency"
)

// Kind declares one kind of operation to the machinery. Everything a kind
// does that is its own is here: its names, its table's own columns (it
// reads its rows with its own SQL; the columns every operation has are the
// machinery's, see Row), what its processor call sends and how it renders.
// Everything else (keys, jobs, retries, reconciliation, the fence, events,
// review, metrics, traces) is derived from its Names and is the same for
// every kind. A kind embeds a Declared for the methods that only return
// what it declares (Names, Errors, States, Object, Request) and the Calls
// its processor's adapter makes for it (Has, LedgerPage), and writes the
// other two.
type Kind interface {
	// Names are the kind's names, from which the machinery derives the rest.
	Names() Names

	// Call queues in b the read of what the processor call of operation id
	// sends beyond what every operation has (none, when it sends nothing
	// else), and returns what binds the calls of the operation, once read,
	// to it (Calls.Bind).
	Call(b *pgx.Batch, id string) (bind func(p *Pending))
	// Final reads, in tx, the operation whose outcome is recorded: its
	// tenant and status, the object its event carries, and the final
	// response stored on its key and replayed to every retry.
	Final(ctx context.Context, tx pgx.Tx, id string) (Final, error)

	// Has is which calls the kind's processor adapter makes (Calls.Has).
	Has() Has
	// LedgerPage is one page of the processor's ledger of this kind,
	// created after since, oldest first, after cursor ("" first); next is
	// "" after the last page. It is called only when the processor declares
	// a ledger (Processor.Ledger).
	LedgerPage(ctx context.Context, since time.Time, cursor string) (page []LedgerEntry, next string, err error)

	// Errors are the refusals the kind's first phase decides, with how they
	// are answered (see ErrorRule).
	Errors() []ErrorRule
	// States are the statuses an operation of the kind can end in, what
	// each means, how it renders and the event it stages (see State).
	States() []State
	// Object and Request are zero values of the resource the API shows and
	// of the request that creates it, for the drift tests of the API
	// document: their schemas are named for the type (Payment, NewPayment).
	Object() any
	Request() any
}

// Declared is what a kind declares and the machinery only reads: its names,
// the zero values of its object and of its request, its first phase's
// refusals and its states. A kind embeds the Declared that Declare makes,
// for the methods of Kind of those names; NewRegistry checks them as it
// checks every kind, so a kind left undeclared (the zero Declared) is
// refused.
type Declared struct {
	names           Names
	object, request any
	errors          []ErrorRule
	states          []State
}

// Declare is the Declared of the kind named names, whose resource is object
// and whose creating request is request (zero values, as Kind.Object and
// Kind.Request), and whose first phase refuses with errors. Its states are
// succeeded and failed (DefaultStates), unless WithStates declares others.
func Declare(names Names, object, request any, errors ...ErrorRule) Declared {
	return Declared{names: names, object: object, request: request, errors: errors, states: DefaultStates(names)}
}

// WithStates is d with states instead of its own, each State's Event,
// when empty, <type>.<status>.
func (d Declared) WithStates(states ...State) Declared {
	d.states = make([]State, len(states))
	for i, st := range states {
		if st.Event == "" {
			st.Event = d.names.Type + "." + st.Status
		}
		d.states[i] = st
	}
	return d
}

// States implements Kind.
func (d Declared) States() []State { return d.states }

// State is the declared state of status; an error for a status the kind
// does not declare, which is never taken for a failure.
func (d Declared) State(status string) (State, error) { return stateOf(d.names, d.states, status) }

// Names implements Kind.
func (d Declared) Names() Names { return d.names }

// Errors implements Kind.
func (d Declared) Errors() []ErrorRule { return d.errors }

// Object implements Kind.
func (d Declared) Object() any { return d.object }

// Request implements Kind.
func (d Declared) Request() any { return d.request }

// Names are what a kind is called. Every other name of the kind is derived
// from them, the same way for every kind.
type Names struct {
	// Type names the resource: on its idempotency key, in its events
	// ("payment.succeeded"), its job, metrics, traces and the review queue
	// ("payment_given_up").
	Type string
	// Prefix starts the resource's ids ("pay_").
	Prefix string
	// Path is where the API serves one resource: Path + "/" + id.
	Path string
	// Table holds the operations ("payments"): the columns every
	// operation has (see Row), the processor's id among them as
	// processor_<object>_id, then the kind's own.
	Table string
	// Object is what the processor makes for it ("charge"). It names the
	// downstream key (charge_<id>), the recovery point once the processor's
	// answer is recorded (charge_created), the ledger's review cases
	// (unknown_charge, duplicate_charge, charge_amount_mismatch) and the
	// timings of its processor calls (charge, find_charge, close_charge,
	// ledger_charges: Calls).
	Object string
	// Done is what the processor does to the money, in the past ("charged"):
	// the review case charged_after_failure, and the words of a give-up.
	Done string
}

var (
	// namePattern is what a type, an object, a deed and a table may be: lower-case
	// words joined by underscores, so that derived names read as one.
	namePattern   = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	prefixPattern = regexp.MustCompile(`^[a-z]{1,8}_$`)
	pathPattern   = regexp.MustCompile(`^/v1(/[a-z_]+)+$`)
)

// check refuses names the machinery cannot derive from.
func (n Names) check() error {
	switch {
	case !namePattern.MatchString(n.Type):
		return fmt.Errorf("type %q must be lower-case words joined by underscores", n.Type)
	case !namePattern.MatchString(n.Object):
		return fmt.Errorf("%s: processor object %q must be lower-case words joined by underscores", n.Type, n.Object)
	case !namePattern.MatchString(n.Done):
		return fmt.Errorf("%s: deed %q must be lower-case words joined by underscores", n.Type, n.Done)
	case !namePattern.MatchString(n.Table):
		return fmt.Errorf("%s: table %q must be lower-case words joined by underscores", n.Type, n.Table)
	case !prefixPattern.MatchString(n.Prefix):
		return fmt.Errorf("%s: id prefix %q must be a few lower-case letters and an underscore", n.Type, n.Prefix)
	case !pathPattern.MatchString(n.Path):
		return fmt.Errorf("%s: path %q must be under /v1", n.Type, n.Path)
	}
	return nil
}

// DownstreamKey is the processor idempotency key of operation id: stable for
// the operation and unique across tenants, since ids are; never the client's
// key.
func (n Names) DownstreamKey(id string) string { return n.Object + "_" + id }

// ProcessorColumn is the column of a kind's table that holds the processor's
// id of what it made: processor_<object>_id.
func (n Names) ProcessorColumn() string { return "processor_" + n.Object + "_id" }

// CreatedPoint is the recovery point once the processor's answer is
// recorded on the operation.
func (n Names) CreatedPoint() string { return n.Object + "_created" }

// Location is the URL of operation id.
func (n Names) Location(id string) string { return n.Path + "/" + id }

// CrashPoint is the worker's crash point once the processor has answered
// and nothing is recorded yet (see CrashAfterProcessorResponse).
func (n Names) CrashPoint() string { return n.Type + "_" + CrashAfterProcessorResponse }

// GaveUp is the outcome recorded for an operation given up on through the
// fence: nothing was, or ever will be, made.
func (n Names) GaveUp() Outcome {
	return Outcome{FailureCode: FailureProcessorError, FailureMessage: fmt.Sprintf(
		"The processor could not confirm the %s before the deadline. Nothing was %s, and nothing will be.",
		n.Object, words(n.Done))}
}

// The statuses of every operation.
const (
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
)

// FailureProcessorError is the failure code of an operation the service gave
// up on: the processor confirmed, through the fence, that nothing was or
// ever will be made under its downstream key.
const FailureProcessorError = "processor_error"

var (
	// ErrProcessorUnknown reports a processor call whose outcome is not known:
	// a timeout, a connection error or a 5xx. The operation may or may not
	// exist, so the call is retried with the same downstream key, never a new
	// one, or the processor is asked what happened.
	ErrProcessorUnknown = errors.New("processor outcome unknown")
	// ErrKeyClosed reports an operation refused because its downstream key
	// was closed (Pending.Close): the service gave up on it, and nothing was or
	// ever will be made with that key.
	ErrKeyClosed = errors.New("processor: downstream key closed")
)

// Pending is an operation as its outcome phase needs it (Load).
type Pending struct {
	ID string
	// TenantID owns the operation.
	TenantID string
	// KeyID is the operation's idempotency key, and RecoveryPoint where it
	// stood when read; nil once reaped, which only happens to finished keys.
	KeyID         *int64
	RecoveryPoint *string
	// PastDeadline is whether the deadline has passed, by the database clock.
	PastDeadline bool
	// Amount and Currency are what the operation asks of the processor; an
	// operation on another may ask in that one's currency.
	Amount   int64
	Currency string
	// Status is the operation's status as stored, and ProcessorID and
	// FailureCode what its processor made and the code it failed with.
	Status                   string
	ProcessorID, FailureCode *string
	// Recorded is the outcome recorded on the operation, as its kind's
	// states read Status (the machinery sets it when it loads the
	// operation); nil while it is processing.
	Recorded *Outcome
	// CreatedAt is when the operation was created, by the database clock.
	CreatedAt time.Time
	// Make is the one processor call, made with the operation's downstream
	// key: a definite Outcome, or an error wrapping ErrProcessorUnknown,
	// ErrKeyClosed or ErrNotSent. The kind binds it, and Find and Close,
	// to what they send (Kind.Call).
	Make func(ctx context.Context) (Outcome, error)
	// Find asks the processor what was made under the operation's
	// downstream key, sending what Make sends: found is false only when the
	// processor confirms that nothing was (yet). Nil when the processor has
	// no lookup (Processor.Lookup is not LookupQuery).
	Find func(ctx context.Context) (out Outcome, found bool, err error)
	// Close is the processor's fence on the operation's downstream key:
	// once it returns, nothing can ever be made under it; made reports what
	// was made before (the close waits for what is in flight). Nil when the
	// processor has no fence (Processor.Fence).
	Close func(ctx context.Context) (out Outcome, made bool, err error)
}

// recordedOf is the outcome recorded on p, an operation of kind k, as its
// status, its processor's id and failure code say: nil while it is
// processing, and an error for a status k does not declare.
func recordedOf(k Kind, p Pending) (*Outcome, error) {
	if p.Status == StatusProcessing {
		return nil, nil
	}
	st, err := StateOf(k, p.Status)
	if err != nil {
		return nil, err
	}
	return &Outcome{ID: deref(p.ProcessorID), Succeeded: st.Succeeded, Waiting: st.Waiting, Status: st.Status,
		FailureCode: deref(p.FailureCode)}, nil
}

// Final is a finished operation, as its last phase stores it.
type Final struct {
	TenantID string
	// Status is one of the kind's States.
	Status string
	// Object is the operation as its event carries it.
	Object any
	// Response is the final response, stored on the key and replayed.
	Response idempotency.Response
	// Parent is the operation's parent, read when its state stages an event
	// about it (State.Parent); nil otherwise.
	Parent *Parent
}

// Parent is the operation another one changes (the payment of a refund),
// as the event about it carries it.
type Parent struct {
	ID     string
	Object any
}

// Outcome is a definite answer about one processor operation: made and
// succeeded, made and declined, or refused without being made (ID empty).
type Outcome struct {
	// ID is the processor's id of what it made; empty when nothing was.
	ID        string
	Succeeded bool
	// Status is the kind's state the outcome puts the operation in (one of
	// its States, agreeing with Succeeded and Waiting); empty: the first of
	// its states that succeeded, or that failed, as Succeeded says, and
	// that waits as Waiting says.
	Status string
	// Waiting is a success the processor has not finished: it settles the
	// operation later, by its webhook (Processor.ByWebhook).
	Waiting        bool
	FailureCode    string
	FailureMessage string
}

// LedgerEntry is one operation as the processor's ledger holds it.
type LedgerEntry struct {
	ID             string
	IdempotencyKey string
	// Reference is the id of our operation the entry belongs to, as the
	// processor echoes it (a charge's payment id, or the downstream key
	// without its prefix); empty when it names none.
	Reference string
	Succeeded bool
	Amount    int64
	// Currency is empty when the processor names none, and only the amount
	// is then compared.
	Currency  string
	CreatedAt time.Time
}

// Accounted is how our records stand for one operation of the ledger.
type Accounted struct {
	Status      string
	ProcessorID *string
	Amount      int64
	Currency    string
}

// ErrorRule is one refusal of a kind's first phase and how it is answered:
// the one table of package render maps every error to its status and code,
// and takes these from each kind.
type ErrorRule struct {
	Err    error
	Status int
	Code   string
	Title  string
	// Detail, when set, replaces the error's own text.
	Detail string
}

// The paths that settle operations. Exactly one records each operation's
// outcome: the one whose conditional commit moves its key past started. It
// is stored on the operation, as settled_by.
const (
	// SettledByWorker is the operation's job, which makes the processor call.
	SettledByWorker = "worker"
	// SettledByWebhook is the processor's webhook about the operation.
	SettledByWebhook = "webhook"
	// SettledByReconciler is the reconciler: a lookup by key, or the fence.
	SettledByReconciler = "reconciler"
)

// SettlePaths lists every settle path, for metrics that start at zero.
var SettlePaths = []string{SettledByWorker, SettledByWebhook, SettledByReconciler}

// CrashAfterProcessorResponse ends the worker's crash points (see package
// crash), each prefixed with its kind's type: "payment_after_processor_
// response". It is reached when the processor has answered and the
// transaction that records the answer and finishes the key has not
// committed: the only moment a worker's death can lose what the processor
// did.
const CrashAfterProcessorResponse = "after_processor_response"

// CrashAfterFirstPhase is the API's crash point, reached when an
// operation's first phase has committed and the request has not started
// waiting.
const CrashAfterFirstPhase = "after_first_phase"

// words is a name with its underscores as spaces: "paid_out" reads "paid out".
func words(name string) string { return strings.ReplaceAll(name, "_", " ") }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Nullable is s, or nil when it is empty: SQL NULL.
func Nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
