package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	if idempotencyKey == "" {
		idempotencyKey = NewIdempotencyKey()
	}
	if paymentID == "" {
		return nil, &Response{IdempotencyKey: idempotencyKey}, errors.New("create refund: empty payment id")
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, &Response{IdempotencyKey: idempotencyKey}, fmt.Errorf("encode refund: %w", err)
	}
	path := "/v1/payments/" + url.PathEscape(paymentID) + "/refunds"
	re, resp, err := send[Refund](ctx, c, http.MethodPost, path, idempotencyKey, body)
	if apiErr, ok := errors.AsType[*Error](err); ok && re == nil && apiErr.Refund != nil {
		re = apiErr.Refund
	}
	return re, resp, err
}

// GetRefund returns the refund with the given id, as it stands now.
func (c *Client) GetRefund(ctx context.Context, id string) (*Refund, error) {
	if id == "" {
		return nil, errors.New("get refund: empty id")
	}
	re, _, err := send[Refund](ctx, c, http.MethodGet, "/v1/refunds/"+url.PathEscape(id), "", nil)
	return re, err
}
