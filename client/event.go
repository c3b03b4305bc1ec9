package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The types of event, and EventAll, which an endpoint's EnabledEvents uses
// for every type, those added later included.
const (
	EventPaymentSucceeded = "payment.succeeded"
	EventPaymentFailed    = "payment.failed"
	EventRefundSucceeded  = "refund.succeeded"
	EventRefundFailed     = "refund.failed"
	// EventPaymentRefunded follows each refund.succeeded: the payment, with
	// the refund counted in its AmountRefunded.
	EventPaymentRefunded = "payment.refunded"
	EventAll             = "*"
)

// Event is something that happened to a payment or a refund: the body of
// every webhook delivery of it.
type Event struct {
	ID     string    `json:"id"`
	Object string    `json:"object"`
	Type   string    `json:"type"`
	Data   EventData `json:"data"`
	// Request names the API request that caused the event; nil when the
	// server does not say.
	Request   *EventRequest `json:"request"`
	CreatedAt time.Time     `json:"created_at"`
}

// EventData holds the resource as it was when the event happened, a Payment
// or a Refund: see Event.Payment and Event.Refund.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

// EventRequest is the API request that caused an event: its X-Request-Id
// (Response.RequestID) and its Idempotency-Key, each nil when not known.
type EventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// EventList is one page of events, newest first.
type EventList = List[Event]

// Payment returns the payment the event is about, as it was then; an error
// when the event is about something else.
func (e *Event) Payment() (*Payment, error) {
	return eventObject[Payment](e, "payment")
}

// Refund returns the refund the event is about, as it was then; an error
// when the event is about something else.
func (e *Event) Refund() (*Refund, error) {
	return eventObject[Refund](e, "refund")
}

// eventObject decodes e's data.object as T, which must be of kind object.
func eventObject[T any](e *Event, object string) (*T, error) {
	var kind struct {
		Object string `json:"object"`
	}
	if err := json.Unmarshal(e.Data.Object, &kind); err != nil {
		return nil, fmt.Errorf("event %s: decode data.object: %w", e.ID, err)
	}
	if kind.Object != object {
		return nil, fmt.Errorf("event %s is about a %q, not a %s", e.ID, kind.Object, object)
	}
	v := new(T)
	if err := json.Unmarshal(e.Data.Object, v); err != nil {
		return nil, fmt.Errorf("event %s: decode %s: %w", e.ID, object, err)
	}
	return v, nil
}

// GetEvent returns the event with the given id.
func (c *Client) GetEvent(ctx context.Context, id string) (*Event, error) {
	return fetchID[Event](ctx, c, http.MethodGet, "get event", id, eventPath(id))
}

// ListEvents returns a page of events, newest first, as ListPayments does.
func (c *Client) ListEvents(ctx context.Context, limit int, startingAfter string) (*EventList, error) {
	return fetch[EventList](ctx, c, http.MethodGet, listPath("/v1/events", limit, startingAfter))
}

// ListEventDeliveries returns a page of the deliveries of the event id, one
// per endpoint that wanted it, newest first; limit and startingAfter page as
// in ListPayments.
func (c *Client) ListEventDeliveries(ctx context.Context, id string, limit int, startingAfter string) (*WebhookDeliveryList, error) {
	path := listPath(eventPath(id)+"/deliveries", limit, startingAfter)
	return fetchID[WebhookDeliveryList](ctx, c, http.MethodGet, "list event deliveries", id, path)
}

// eventPath is the path of the event id.
func eventPath(id string) string {
	return "/v1/events/" + url.PathEscape(id)
}
