package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
)

// Charges are the calls the client makes for charges: all four.
func (c *Client) Charges() operation.Calls[payments.ChargeRequest] {
	return callsOf(c, chargeObjects, c.Charge, func(req payments.ChargeRequest) string { return req.IdempotencyKey })
}

// chargeObjects are the processor's charges.
var chargeObjects = objects[ChargeObject]{name: "charges", member: "charge"}

// ErrNotFound reports a charge the processor does not know.
var ErrNotFound = errors.New("processor: no such charge")

// ChargeObject is a charge as the processor returns it. Members that are
// null on the wire are empty.
type ChargeObject struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	PaymentMethod  string    `json:"payment_method"`
	PaymentID      string    `json:"payment_id"`
	Description    string    `json:"description"`
	Status         string    `json:"status"`
	FailureCode    string    `json:"failure_code"`
	FailureMessage string    `json:"failure_message"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// Succeeded reports whether the charge went through.
func (c ChargeObject) Succeeded() bool { return c.Status == "succeeded" }

// entry is the charge as an entry of the processor's ledger: its Reference
// is the payment the charge names.
func (c ChargeObject) entry() operation.LedgerEntry {
	return operation.LedgerEntry{ID: c.ID, IdempotencyKey: c.IdempotencyKey, Reference: c.PaymentID,
		Succeeded: c.Succeeded(), Amount: c.Amount, Currency: c.Currency, CreatedAt: c.CreatedAt}
}

// outcome is the charge as an operation's outcome.
func (c ChargeObject) outcome() operation.Outcome {
	return operation.Outcome{ID: c.ID, Succeeded: c.Succeeded(), FailureCode: c.FailureCode, FailureMessage: c.FailureMessage}
}

// chargeRequest is the body of POST /v1/charges.
type chargeRequest struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	PaymentID     string `json:"payment_id,omitempty"`
	Description   string `json:"description,omitempty"`
}

// Charge creates a charge under req.IdempotencyKey, or returns the one the
// processor already created under it. A decline is an Outcome with the
// declined charge's ID; any other 4xx refusal is an Outcome with no ID,
// since nothing was charged. A closed key wraps operation.ErrKeyClosed; a
// timeout, connection error, 5xx, 409 or 429 wraps
// operation.ErrProcessorUnknown.
func (c *Client) Charge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, error) {
	return chargeObjects.create(ctx, c, req.IdempotencyKey, chargeRequest{
		Amount:        req.Amount,
		Currency:      req.Currency,
		PaymentMethod: req.PaymentMethod,
		PaymentID:     req.PaymentID,
		Description:   req.Description,
	}, declined)
}

// declined reads the 402 of a charge: a card_error naming the declined
// charge.
func declined(resp []byte) (operation.Outcome, error) {
	apiErr, _ := decodeError(http.StatusPaymentRequired, resp)
	if apiErr.Type != "card_error" || apiErr.Charge == "" {
		return operation.Outcome{}, fmt.Errorf("%w: unexpected 402 answer: %w", operation.ErrProcessorUnknown, apiErr)
	}
	return operation.Outcome{ID: apiErr.Charge, FailureCode: apiErr.Code, FailureMessage: apiErr.Message}, nil
}

// ChargesByIdempotencyKey lists the charges the processor made under key,
// oldest first: none when it never executed a request with that key.
func (c *Client) ChargesByIdempotencyKey(ctx context.Context, key string) ([]ChargeObject, error) {
	return chargeObjects.byKey(ctx, c, key)
}

// ChargesByPayment lists the charges that reference paymentID, oldest first.
func (c *Client) ChargesByPayment(ctx context.Context, paymentID string) ([]ChargeObject, error) {
	list, err := getFullList[ChargeObject](ctx, c, chargeObjects.path(), url.Values{"payment_id": {paymentID}})
	if err != nil {
		return nil, fmt.Errorf("charges by payment: %w", err)
	}
	return list, nil
}

// GetCharge returns one charge, or an error wrapping ErrNotFound.
func (c *Client) GetCharge(ctx context.Context, id string) (ChargeObject, error) {
	status, resp, err := c.do(ctx, http.MethodGet, chargeObjects.path()+"/"+url.PathEscape(id), "", nil)
	if err != nil {
		return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, err)
	}
	switch status {
	case http.StatusOK:
		var ch ChargeObject
		if err := json.Unmarshal(resp, &ch); err != nil {
			return ChargeObject{}, fmt.Errorf("get charge %s: %w: decode: %w", id, operation.ErrProcessorUnknown, err)
		}
		return ch, nil
	case http.StatusNotFound:
		return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, ErrNotFound)
	}
	return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, classify(status, resp))
}
