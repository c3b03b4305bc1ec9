package http

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/webhook"
)

// ProcessorWebhooks is how the API receives the processor's webhooks.
type ProcessorWebhooks struct {
	// Secrets verify the deliveries (webhook.Secrets for the fake processor,
	// stripe.Secrets for Stripe); with none, every delivery is refused.
	Secrets Verifier
	// Parse reads a verified body into the event about one operation
	// (gateway.ParseEvent or stripe.ParseEvent, for the processor this
	// service calls).
	Parse func(body []byte) (operation.ProcessorEvent, error)
	// Now is the clock the timestamp tolerance is decided by; nil means
	// time.Now.
	Now func() time.Time
}

// Verifier checks that a delivery of the processor's webhook was signed by
// the processor, on its raw body, before anything reads it, and returns the
// id of the event it carries. A refusal wraps webhook.ErrSignature, or
// webhook.ErrStale for one correctly signed outside the tolerance.
type Verifier interface {
	Verify(body []byte, h http.Header, now time.Time) (id string, err error)
}

// The results of a delivery, the values of the result label: those of
// operation.Service.ReceiveProcessorEvent, and the refusals before it.
const (
	webhookInvalidSignature = "invalid_signature"
	webhookStale            = "stale"
	webhookMalformed        = "malformed"
	webhookTooLarge         = "too_large"
	webhookIgnored          = "ignored"
)

// webhookResults are every value of the result label, so that each series
// exists from the start.
var webhookResults = []string{operation.EventAccepted, operation.EventDuplicate, operation.EventUnknownOperation,
	webhookInvalidSignature, webhookStale, webhookMalformed, webhookTooLarge, webhookIgnored}

func newWebhookMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payments_processor_webhooks_received_total",
		Help: "Processor webhook deliveries by result: accepted, duplicate, unknown_operation (recorded and sent to review), " +
			"invalid_signature, stale (outside the five-minute tolerance), malformed, too_large, ignored (a type that settles nothing).",
	}, []string{"result"})
	for _, result := range webhookResults {
		c.WithLabelValues(result)
	}
	reg.MustRegister(c)
	return c
}

// receiveProcessorWebhook is POST /v1/processor/webhooks. The signature
// alone authenticates it: verified on the raw body, before anything is
// read from it. An accepted event is recorded durably, with the job that
// settles its operation, before the 200; a duplicate is a 200 that changed
// nothing. Any refusal changes nothing.
func (s *Server) receiveProcessorWebhook(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if errors.Is(err, render.ErrTooLarge) {
		s.countWebhook(webhookTooLarge)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in := s.ProcessorWebhooks
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	id, err := "", error(webhook.ErrSignature)
	if in.Secrets != nil {
		id, err = in.Secrets.Verify(body, r.Header, now())
	}
	if err != nil {
		result := webhookInvalidSignature
		if errors.Is(err, webhook.ErrStale) {
			result = webhookStale
		}
		s.countWebhook(result)
		s.Logger.WarnContext(r.Context(), "processor webhook refused", "request_id", requestIDOf(r.Context()), "result", result,
			"webhook_id", loggedHeader(r.Header, webhook.HeaderID), "webhook_timestamp", loggedHeader(r.Header, webhook.HeaderTimestamp))
		s.writeError(w, r, render.ErrWebhookSignature)
		return
	}
	ev, err := in.Parse(body)
	if err == nil && ev.ID != id {
		err = fmt.Errorf("%w: the event id %q is not the webhook-id %q", operation.ErrEventMalformed, ev.ID, id)
	}
	switch {
	case errors.Is(err, operation.ErrEventNotHandled):
		s.countWebhook(webhookIgnored)
		writeJSON(w, http.StatusOK, webhookReceipt{ID: id, Result: webhookIgnored})
		return
	case err != nil:
		s.countWebhook(webhookMalformed)
		s.Logger.ErrorContext(r.Context(), "processor webhook malformed", "request_id", requestIDOf(r.Context()), "webhook_id", id, "err", err)
		s.writeError(w, r, err)
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("payments.processor_event_id", id),
		attribute.String("payments.downstream_key", ev.DownstreamKey))
	result, err := s.Ops.ReceiveProcessorEvent(r.Context(), ev)
	if err != nil {
		if errors.Is(err, operation.ErrEventMalformed) {
			// A state its kind does not declare.
			s.countWebhook(webhookMalformed)
		}
		s.writeError(w, r, err)
		return
	}
	s.countWebhook(result)
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("payments.processor_event_result", result))
	writeJSON(w, http.StatusOK, webhookReceipt{ID: id, Result: result})
}

// maxLoggedHeader bounds what the line of a refused delivery keeps of each
// header it names. Such a delivery is not authenticated: anyone may send one,
// with up to 32 KiB of headers each time, and the logs must not carry that.
// The line names two headers (never the signature), so it holds at most
// 256 bytes of what the sender chose.
const maxLoggedHeader = 128

// loggedHeader is the first value of header name in h, cut to at most
// maxLoggedHeader bytes of valid UTF-8.
func loggedHeader(h http.Header, name string) string {
	v := h.Get(name)
	if len(v) > maxLoggedHeader {
		v = v[:maxLoggedHeader]
	}
	return strings.ToValidUTF8(v, "")
}

// webhookReceipt is the answer to a delivery the API took.
type webhookReceipt struct {
	ID     string `json:"id"`
	Result string `json:"result"`
}

func (s *Server) countWebhook(result string) {
	if s.webhookMetrics != nil {
		s.webhookMetrics.WithLabelValues(result).Inc()
	}
}
