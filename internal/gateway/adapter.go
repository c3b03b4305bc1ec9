// Package gateway is the processor boundary: what every processor's adapter
// shares. An adapter lives in a package of its own beside this one, named
// for its processor, and declares itself once, as an Adapter: the name PROCESSOR picks it by, its own settings, what the
// processor can do (operation.Processor: a lookup, a fence, a ledger, which
// kinds settle only by webhook, its key retention, its largest ledger page,
// its payment methods' format), its calls and its webhooks. The list of
// adapters is package catalog's; everything that depends on the processor
// reads the declaration of the one PROCESSOR names, and nothing else names
// one. This package holds no adapter of its own.
package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/operation"
)

// Adapter declares one processor to the service.
type Adapter struct {
	// Name is the processor's, the value of PROCESSOR that picks it: lower
	// case, as the adapter's package is named.
	Name string
	// Summary says in a line what the processor is, for -h.
	Summary string
	// Settings returns the adapter's own settings, unset: a pointer to a
	// struct the environment is read into (envconfig tags) when PROCESSOR
	// names the adapter, and that -h lists under its name. Nothing else
	// names them.
	Settings func() Settings
}

// Settings are an adapter's own settings, as read from the environment, and
// what the service makes of them. Formatted or logged, they show no secret.
type Settings interface {
	// Processor is what the processor can do, as these settings make it
	// (a processor's key retention may be one of them).
	Processor() operation.Processor
	// Calls is the worker's client of the processor: every kind's calls
	// (package catalog's Processor), with a kind's lookup, fence and ledger
	// exactly where Processor declares them. It refuses settings the calls
	// need and lack, naming them.
	Calls(opts Options) (any, error)
	// Webhooks is the API's reader of the processor's webhooks. It refuses
	// settings it needs and lacks, naming them; with no signing secret set,
	// it refuses every delivery.
	Webhooks() (Webhooks, error)
}

// Options are the worker's settings every adapter's client is made with.
type Options struct {
	// Timeout bounds each HTTP request to the processor (PROCESSOR_TIMEOUT).
	Timeout time.Duration
	// PageSize is the limit of one ledger page (RECONCILE_LEDGER_PAGE), at
	// most the processor's largest; zero means the largest.
	PageSize int
	// Tracer makes each request a client span; nil means the global
	// provider.
	Tracer trace.TracerProvider
	// Pace keeps the requests within the processor's rate limit, across
	// every worker (PROCESSOR_RATE_LIMIT); nil means none. An adapter's
	// client sends every request through Paced.
	Pace *Pace
}

// Webhooks is how the API takes the processor's webhooks: verified on the
// raw delivery before anything reads it, split into the events it carries,
// and answered as the processor expects.
type Webhooks interface {
	// Verify checks that a delivery was signed by the processor, on its raw
	// body and headers, within the processor's tolerance of now. A refusal
	// wraps webhook.ErrSignature, or webhook.ErrStale for one correctly
	// signed outside the tolerance.
	Verify(body []byte, h http.Header, now time.Time) error
	// Events reads a verified delivery into the events it carries, one or
	// several, in order. An event of a type that settles nothing is kept,
	// Ignored, with its ID only. A delivery any event of which cannot be
	// read wraps operation.ErrEventMalformed, and none of it is taken.
	Events(body []byte, h http.Header) ([]Event, error)
	// Answer writes the answer to a delivery whose every event was taken:
	// receipts has one for each of its events, in order.
	Answer(w http.ResponseWriter, receipts []Receipt)
}

// Event is one event of a webhook delivery: about an operation, or, when
// Ignored, of a type that settles nothing here (only its ID is read).
type Event struct {
	operation.ProcessorEvent
	Ignored bool
}

// Receipt is what the API did with one event of a delivery: Result is
// operation.EventAccepted, EventDuplicate, EventUnknownOperation, or
// ResultIgnored.
type Receipt struct {
	ID     string `json:"id"`
	Result string `json:"result"`
}

// ResultIgnored is the receipt of an event of a type that settles nothing.
const ResultIgnored = "ignored"

// Unknown wraps err in operation.ErrProcessorUnknown unless it already is:
// a call whose answer cannot be read, or a question the processor did not
// answer, is asked again later.
func Unknown(err error) error {
	if errors.Is(err, operation.ErrProcessorUnknown) {
		return err
	}
	return fmt.Errorf("%w: %w", operation.ErrProcessorUnknown, err)
}

// TooManyRequests wraps err, a processor's 429 answer, in
// operation.ErrNotSent: nothing was executed, and the request is made again
// under its key after the wait h asks for in Retry-After (seconds, or an
// HTTP date), if any.
func TooManyRequests(err error, h http.Header) error {
	return operation.NotSent(err, retryAfter(h.Get("Retry-After"), time.Now()))
}

// retryAfter is the wait a Retry-After value asks for at now: zero when
// there is none, or it cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// SavedFailure wraps err, a failure the processor saved for the call's key
// and replays to every call made again with it, in
// operation.ErrSavedFailure and operation.ErrProcessorUnknown: the
// operation may or may not exist, and no retry can tell.
func SavedFailure(err error) error {
	return fmt.Errorf("%w: %w: %w", operation.ErrSavedFailure, operation.ErrProcessorUnknown, err)
}

// Unknownf is an error wrapping operation.ErrProcessorUnknown that says
// what was odd.
func Unknownf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", operation.ErrProcessorUnknown, fmt.Sprintf(format, args...))
}

// Single is the events of a delivery that carries one event, as an
// adapter's parse read it (ev, err), id being the event's id: one Ignored
// event when err wraps operation.ErrEventNotHandled, and err otherwise.
func Single(ev operation.ProcessorEvent, err error, id string) ([]Event, error) {
	switch {
	case errors.Is(err, operation.ErrEventNotHandled):
		return []Event{{ProcessorEvent: operation.ProcessorEvent{ID: id}, Ignored: true}}, nil
	case err != nil:
		return nil, err
	case ev.ID != id:
		return nil, fmt.Errorf("%w: the event id %q is not the delivery's %q", operation.ErrEventMalformed, ev.ID, id)
	}
	return []Event{{ProcessorEvent: ev}}, nil
}

// AnswerJSON answers a delivery of one event 200 with its receipt as JSON,
// {"id": …, "result": …}: the answer of a processor that reads none.
func AnswerJSON(w http.ResponseWriter, receipts []Receipt) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	var r Receipt
	if len(receipts) > 0 {
		r = receipts[0]
	}
	_ = json.NewEncoder(w).Encode(r)
}
