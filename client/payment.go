package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// The statuses of a payment or a refund.
const (
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
)

// Payment is a payment as the API shows it.
type Payment struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Amount            int64             `json:"amount"`
	Currency          string            `json:"currency"`
	PaymentMethod     string            `json:"payment_method"`
	Description       *string           `json:"description"`
	Metadata          map[string]string `json:"metadata"`
	Status            string            `json:"status"`
	FailureCode       *string           `json:"failure_code"`
	FailureMessage    *string           `json:"failure_message"`
	ProcessorChargeID *string           `json:"processor_charge_id"`
	// AmountRefunded is what the payment's refunds have taken back from it.
	AmountRefunded int64     `json:"amount_refunded"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// CreatePaymentParams is the body of a new payment. Amount is in minor units
// (cents); Currency is an ISO 4217 code; PaymentMethod is a processor token
// such as pm_card_visa. Description and Metadata are optional and left out of
// the request when empty.
type CreatePaymentParams struct {
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentMethod string            `json:"payment_method"`
	Description   *string           `json:"description,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// List is one page of a list, newest first. HasMore reports whether older
// items follow; ask for them with the last one's ID as startingAfter.
type List[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// PaymentList is one page of payments, newest first.
type PaymentList = List[Payment]

// CreatePayment creates a payment under idempotencyKey, or under a random key
// generated once for this call when idempotencyKey is "", and retries with
// that same key until the answer is final or the attempts run out.
//
// A payment that succeeded comes back with a nil error. A declined payment
// comes back together with an *Error whose IsDeclined reports true, and a
// payment the processor could not charge together with a 502 *Error of code
// processor_error: both are final. A payment still processing when the
// attempts run out comes back with a nil error and resp.StatusCode 202: it is
// accepted, and GetPayment tells how it ends; if ctx ends while such a
// payment is waited for, it comes back with ctx's error. Any other error
// means the outcome is unknown or nothing was done, and calling again with
// resp.IdempotencyKey is always safe.
//
// The Response is never nil, so the key used is always known.
func (c *Client) CreatePayment(ctx context.Context, idempotencyKey string, p CreatePaymentParams) (*Payment, *Response, error) {
	pay, resp, err := post[Payment](ctx, c, send[Payment], "create payment", idempotencyKey, "/v1/payments", p)
	if apiErr, ok := errors.AsType[*Error](err); ok && pay == nil && apiErr.Payment != nil {
		// A final failure carries the failed payment: the caller gets both.
		pay = apiErr.Payment
	}
	return pay, resp, err
}

// GetPayment returns the payment with the given id, as it stands now.
func (c *Client) GetPayment(ctx context.Context, id string) (*Payment, error) {
	return fetchID[Payment](ctx, c, http.MethodGet, "get payment", id, "/v1/payments/"+url.PathEscape(id))
}

// ListPayments returns a page of payments, newest first. A limit of 0 takes
// the server's default page size; startingAfter, when not "", is the id of the
// last payment of the previous page.
func (c *Client) ListPayments(ctx context.Context, limit int, startingAfter string) (*PaymentList, error) {
	return fetch[PaymentList](ctx, c, http.MethodGet, listPath("/v1/payments", limit, startingAfter))
}
