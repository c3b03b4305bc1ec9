package client

import (
	"context"
	"net/http"
	"time"
)

// The statuses of a webhook delivery.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// The outcomes of a delivery attempt, to filter the delivery log by.
const (
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
)

// WebhookDelivery is one event's delivery to one endpoint. Status is
// DeliveryPending until the receiver answers 2xx (DeliveryDelivered) or the
// attempts end (DeliveryFailed). Attempts counts the current round: a resend
// starts a new one.
type WebhookDelivery struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Endpoint    string     `json:"endpoint"`
	Event       string     `json:"event"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// WebhookDeliveryList is one page of deliveries.
type WebhookDeliveryList = List[WebhookDelivery]

// WebhookDeliveryAttempt is one attempt of a delivery, a line of an
// endpoint's delivery log. StatusCode is nil when the receiver gave no
// answer; Error is nil when the attempt delivered; NextRetryAt is nil when no
// attempt follows.
type WebhookDeliveryAttempt struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Delivery    string     `json:"delivery"`
	Event       string     `json:"event"`
	Attempt     int        `json:"attempt"`
	StatusCode  *int       `json:"status_code"`
	DurationMS  int        `json:"duration_ms"`
	Error       *string    `json:"error"`
	NextRetryAt *time.Time `json:"next_retry_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// WebhookDeliveryAttemptList is one page of a delivery log, newest first.
type WebhookDeliveryAttemptList = List[WebhookDeliveryAttempt]

// ListDeliveryAttemptsParams selects a page of a delivery log. Limit and
// StartingAfter page as in ListPayments; Status (AttemptSucceeded or
// AttemptFailed) and Type (an event type) filter, and are not sent when "".
type ListDeliveryAttemptsParams struct {
	Limit         int
	StartingAfter string
	Status        string
	Type          string
}

// ListWebhookDeliveryAttempts returns a page of the delivery log of the
// webhook endpoint id, an attempt a line, newest first.
func (c *Client) ListWebhookDeliveryAttempts(ctx context.Context, id string, p ListDeliveryAttemptsParams) (*WebhookDeliveryAttemptList, error) {
	path := listPath(endpointPath(id)+"/deliveries", p.Limit, p.StartingAfter, "status", p.Status, "type", p.Type)
	return fetchID[WebhookDeliveryAttemptList](ctx, c, http.MethodGet, "list webhook delivery attempts", id, path)
}
