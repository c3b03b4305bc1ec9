package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/example/payments/internal/payments"
)

// event is the body of the processor's webhook: {"id", "type", "created",
// "data": {"object": <the charge or refund>}}.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// The event types that settle operations, and the status their object must
// have.
var eventStatus = map[string]string{
	"charge.succeeded": "succeeded",
	"charge.failed":    "failed",
	"refund.succeeded": "succeeded",
	"refund.failed":    "failed",
}

// ParseEvent reads the body of a processor webhook, already verified as
// signed by the processor, into the event about one operation. A type that
// settles nothing wraps payments.ErrEventNotHandled; a body that is not such
// an event wraps payments.ErrEventMalformed. This is where a forker maps
// their processor's events to operations.
func ParseEvent(body []byte) (payments.ProcessorEvent, error) {
	var e event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return payments.ProcessorEvent{}, fmt.Errorf("%w: %w", payments.ErrEventMalformed, err)
	}
	if e.ID == "" || len(e.ID) > 255 {
		return payments.ProcessorEvent{}, fmt.Errorf("%w: the id is missing or longer than 255 bytes", payments.ErrEventMalformed)
	}
	want, ok := eventStatus[e.Type]
	if !ok {
		return payments.ProcessorEvent{}, fmt.Errorf("%w: %q", payments.ErrEventNotHandled, e.Type)
	}
	ev := payments.ProcessorEvent{ID: e.ID, Type: e.Type, Payload: body}
	var status, key string
	switch kind, _, _ := strings.Cut(e.Type, "."); kind {
	case "charge":
		var c ChargeObject
		if err := json.Unmarshal(e.Data.Object, &c); err != nil || c.Object != "charge" || c.ID == "" {
			return payments.ProcessorEvent{}, fmt.Errorf("%w: data.object is not a charge", payments.ErrEventMalformed)
		}
		ev.Outcome, ev.Amount, ev.Currency, status, key = c.outcome(), c.Amount, c.Currency, c.Status, c.IdempotencyKey
	default:
		var r RefundObject
		if err := json.Unmarshal(e.Data.Object, &r); err != nil || r.Object != "refund" {
			return payments.ProcessorEvent{}, fmt.Errorf("%w: data.object is not a refund", payments.ErrEventMalformed)
		}
		ev.Outcome, ev.Amount, status, key = r.outcome(), r.Amount, r.Status, r.IdempotencyKey
	}
	switch {
	case status != want:
		return payments.ProcessorEvent{}, fmt.Errorf("%w: a %s event about an object with status %q", payments.ErrEventMalformed, e.Type, status)
	case key == "":
		return payments.ProcessorEvent{}, fmt.Errorf("%w: the object has no idempotency_key", payments.ErrEventMalformed)
	}
	ev.DownstreamKey = key
	return ev, nil
}
