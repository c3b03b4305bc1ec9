package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// Refund is a refund as the API shows it.
type Refund struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	PaymentID         string    `json:"payment_id"`
	Amount            int64     `json:"amount"`
	Reason            *string   `json:"reason"`
	Status            string    `json:"status"`
	FailureCode       *string   `json:"failure_code"`
	ProcessorRefundID *string   `json:"processor_refund_id"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
}

// CreateRefundParams is the body of a new refund. A nil Amount refunds what is
// left of the payment; Reason is optional. Empty fields are left out.
type CreateRefundParams struct {
	Amount *int64 `json:"amount,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CreateRefund refunds the payment paymentID under idempotencyKey, or under a
// key generated once for this call when idempotencyKey is "". It retries as
// CreatePayment does: a failed refund (402) comes back with an *Error and the
// refund, a refund still processing when the attempts run out comes back with
// resp.StatusCode 202 and a nil error. The Response is never nil.
func (c *Client) CreateRefund(ctx context.Context, idempotencyKey, paymentID string, p CreateRefundParams) (*Refund, *Response, error) {
	if paymentID == "" {
		return nil, &Response{IdempotencyKey: keyOrNew(idempotencyKey)}, errors.New("create refund: empty payment id")
	}
	path := "/v1/payments/" + url.PathEscape(paymentID) + "/refunds"
	re, resp, err := post[Refund](ctx, c, send[Refund], "create refund", idempotencyKey, path, p)
	if apiErr, ok := errors.AsType[*Error](err); ok && re == nil && apiErr.Refund != nil {
		re = apiErr.Refund
	}
	return re, resp, err
}

// GetRefund returns the refund with the given id, as it stands now.
func (c *Client) GetRefund(ctx context.Context, id string) (*Refund, error) {
	return fetchID[Refund](ctx, c, http.MethodGet, "get refund", id, "/v1/refunds/"+url.PathEscape(id))
}
