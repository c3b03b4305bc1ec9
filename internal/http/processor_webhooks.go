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

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/signing"
)

// ProcessorWebhooks is how the API receives the processor's webhooks.
type ProcessorWebhooks struct {
	// Webhooks verify, split and answer the deliveries, as the adapter of
	// the processor this service calls declares them; with none, every
	// delivery is refused.
	Webhooks gateway.Webhooks
	// Now is the clock the timestamp tolerance is decided by; nil means
	// time.Now.
	Now func() time.Time
}

// The results of a delivery, the values of the result label: those of
// operation.Service.ReceiveProcessorEvent, and the refusals before it.
const (
	webhookInvalidSignature = "invalid_signature"
	webhookStale            = "stale"
	webhookMalformed        = "malformed"
	webhookTooLarge         = "too_large"
	webhookIgnored          = gateway.ResultIgnored
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
// read from it. A delivery may carry several events (the processor's
// adapter splits it): each accepted event is recorded durably, with the job
// that settles its operation, before the delivery is answered as the
// processor expects; a duplicate changes nothing. A refusal of the
// delivery, or of any of its events, records nothing more: the processor
// sends it again, and what was recorded is a duplicate then.
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
	err = signing.ErrSignature
	if in.Webhooks != nil {
		err = in.Webhooks.Verify(body, r.Header, now())
	}
	if err != nil {
		result := webhookInvalidSignature
		if errors.Is(err, signing.ErrStale) {
			result = webhookStale
		}
		s.countWebhook(result)
		s.Logger.WarnContext(r.Context(), "processor webhook refused", "request_id", requestIDOf(r.Context()), "result", result,
			"webhook_id", loggedHeader(r.Header, signing.HeaderID), "webhook_timestamp", loggedHeader(r.Header, signing.HeaderTimestamp))
		s.writeError(w, r, render.ErrWebhookSignature)
		return
	}
	events, err := in.Webhooks.Events(body, r.Header)
	if err == nil && len(events) == 0 {
		err = fmt.Errorf("%w: the delivery carries no event", operation.ErrEventMalformed)
	}
	if err != nil {
		s.countWebhook(webhookMalformed)
		s.Logger.ErrorContext(r.Context(), "processor webhook malformed", "request_id", requestIDOf(r.Context()),
			"webhook_id", loggedHeader(r.Header, signing.HeaderID), "err", err)
		s.writeError(w, r, err)
		return
	}
	receipts := make([]gateway.Receipt, len(events))
	for i, ev := range events {
		if receipts[i], err = s.receiveProcessorEvent(r, ev); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	in.Webhooks.Answer(w, receipts)
}

// receiveProcessorEvent records one event of a verified delivery and counts
// what came of it.
func (s *Server) receiveProcessorEvent(r *http.Request, ev gateway.Event) (gateway.Receipt, error) {
	if ev.Ignored {
		s.countWebhook(webhookIgnored)
		return gateway.Receipt{ID: ev.ID, Result: gateway.ResultIgnored}, nil
	}
	span := trace.SpanFromContext(r.Context())
	span.SetAttributes(attribute.String("payments.processor_event_id", ev.ID),
		attribute.String("payments.downstream_key", ev.DownstreamKey))
	result, err := s.Ops.ReceiveProcessorEvent(r.Context(), ev.ProcessorEvent)
	if err != nil {
		if errors.Is(err, operation.ErrEventMalformed) {
			// A state its kind does not declare.
			s.countWebhook(webhookMalformed)
		}
		return gateway.Receipt{}, err
	}
	s.countWebhook(result)
	span.SetAttributes(attribute.String("payments.processor_event_result", result))
	return gateway.Receipt{ID: ev.ID, Result: result}, nil
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

func (s *Server) countWebhook(result string) {
	if s.webhookMetrics != nil {
		s.webhookMetrics.WithLabelValues(result).Inc()
	}
}
