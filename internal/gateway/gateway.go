// Package gateway is the service's HTTP client for the card processor. It
// turns every answer into either a definite outcome (a charge that succeeded
// or was declined, or a request the processor rejected) or an error wrapping
// payments.ErrProcessorUnknown when the outcome cannot be known: a timeout, a
// connection error or a 5xx. The caller retries those with the same
// idempotency key, or asks the processor what happened.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/example/payments/internal/payments"
)

// maxResponseBytes bounds what is read of a response body.
const maxResponseBytes = 1 << 20

// ErrNotFound reports a charge the processor does not know.
var ErrNotFound = errors.New("processor: no such charge")

// Client calls the processor's HTTP API. It is safe for concurrent use.
type Client struct {
	baseURL string
	http    *http.Client
}

// New returns a client for the processor at baseURL, such as
// "http://127.0.0.1:8090". timeout bounds each call as a whole.
func New(baseURL string, timeout time.Duration) *Client {
	return &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		http:    &http.Client{Timeout: timeout},
	}
}

// Client implements the processor as the charge phase sees it.
var _ payments.Processor = (*Client)(nil)

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
	AmountRefunded int64     `json:"amount_refunded"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// Succeeded reports whether the charge went through.
func (c ChargeObject) Succeeded() bool { return c.Status == "succeeded" }

// APIError is an error answer of the processor. A 5xx APIError is returned
// wrapped in payments.ErrProcessorUnknown; errors.As finds it either way.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Type, Code and Message are the processor's error member.
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Charge is the declined charge of a card_error.
	Charge string `json:"charge"`
}

// Error names the status, type and code.
func (e *APIError) Error() string {
	return fmt.Sprintf("processor answered %d %s/%s: %s", e.Status, e.Type, e.Code, e.Message)
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
// processor already created under it. A decline is a definite outcome and
// not an error. A timeout, connection error or 5xx returns an error wrapping
// payments.ErrProcessorUnknown; any other rejection is a definite *APIError.
func (c *Client) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	if req.IdempotencyKey == "" {
		return payments.Charge{}, errors.New("charge: idempotency key is required")
	}
	body, err := json.Marshal(chargeRequest{
		Amount:        req.Amount,
		Currency:      req.Currency,
		PaymentMethod: req.PaymentMethod,
		PaymentID:     req.PaymentID,
		Description:   req.Description,
	})
	if err != nil {
		return payments.Charge{}, fmt.Errorf("charge: encode: %w", err)
	}
	status, resp, err := c.do(ctx, http.MethodPost, "/v1/charges", req.IdempotencyKey, body)
	if err != nil {
		return payments.Charge{}, fmt.Errorf("charge: %w", err)
	}

	switch status {
	case http.StatusOK:
		var ch ChargeObject
		if err := json.Unmarshal(resp, &ch); err != nil || ch.ID == "" {
			// The processor said yes, but to what cannot be read: retrying
			// with the same key replays the answer.
			return payments.Charge{}, fmt.Errorf("charge: %w: unreadable 200 answer: %v", payments.ErrProcessorUnknown, err)
		}
		return payments.Charge{ID: ch.ID, Succeeded: ch.Succeeded(), FailureCode: ch.FailureCode, FailureMessage: ch.FailureMessage}, nil
	case http.StatusPaymentRequired:
		apiErr := decodeError(status, resp)
		if apiErr.Type != "card_error" || apiErr.Charge == "" {
			return payments.Charge{}, fmt.Errorf("charge: %w: unexpected 402 answer: %w", payments.ErrProcessorUnknown, apiErr)
		}
		return payments.Charge{ID: apiErr.Charge, FailureCode: apiErr.Code, FailureMessage: apiErr.Message}, nil
	}
	return payments.Charge{}, fmt.Errorf("charge: %w", classify(status, resp))
}

// refundRequest is the body of POST /v1/refunds.
type refundRequest struct {
	Charge string `json:"charge"`
	Amount int64  `json:"amount"`
}

// Refund refunds part of a charge under req.IdempotencyKey, or returns the
// refund the processor already made under it. It implements
// payments.Processor: a 4xx refusal (amount too large, charge not
// refundable) is a definite failed refund; a timeout, connection error or
// 5xx wraps payments.ErrProcessorUnknown.
func (c *Client) Refund(ctx context.Context, req payments.RefundRequest) (payments.ProcessorRefund, error) {
	if req.IdempotencyKey == "" {
		return payments.ProcessorRefund{}, errors.New("refund: idempotency key is required")
	}
	body, err := json.Marshal(refundRequest{Charge: req.ChargeID, Amount: req.Amount})
	if err != nil {
		return payments.ProcessorRefund{}, fmt.Errorf("refund: encode: %w", err)
	}
	status, resp, err := c.do(ctx, http.MethodPost, "/v1/refunds", req.IdempotencyKey, body)
	if err != nil {
		return payments.ProcessorRefund{}, fmt.Errorf("refund: %w", err)
	}
	if status == http.StatusOK {
		var ref struct{ ID, Status string }
		if err := json.Unmarshal(resp, &ref); err != nil || ref.ID == "" {
			return payments.ProcessorRefund{}, fmt.Errorf("refund: %w: unreadable 200 answer: %v", payments.ErrProcessorUnknown, err)
		}
		return payments.ProcessorRefund{ID: ref.ID, Succeeded: ref.Status == "succeeded"}, nil
	}
	err = classify(status, resp)
	var apiErr *APIError
	if errors.As(err, &apiErr) && !errors.Is(err, payments.ErrProcessorUnknown) && apiErr.Type == "invalid_request_error" && status != http.StatusNotFound {
		return payments.ProcessorRefund{FailureCode: apiErr.Code}, nil
	}
	return payments.ProcessorRefund{}, fmt.Errorf("refund: %w", err)
}

// ChargesByIdempotencyKey lists the charges the processor made under key:
// none when it never executed a request with that key.
func (c *Client) ChargesByIdempotencyKey(ctx context.Context, key string) ([]ChargeObject, error) {
	list, err := c.list(ctx, url.Values{"idempotency_key": {key}})
	if err != nil {
		return nil, fmt.Errorf("charges by idempotency key: %w", err)
	}
	return list, nil
}

// ChargesByPayment lists the charges that reference paymentID.
func (c *Client) ChargesByPayment(ctx context.Context, paymentID string) ([]ChargeObject, error) {
	list, err := c.list(ctx, url.Values{"payment_id": {paymentID}})
	if err != nil {
		return nil, fmt.Errorf("charges by payment: %w", err)
	}
	return list, nil
}

// ChargesCreatedAfter lists up to a page of charges made after t, oldest first.
func (c *Client) ChargesCreatedAfter(ctx context.Context, t time.Time) ([]ChargeObject, error) {
	list, err := c.list(ctx, url.Values{"created_after": {t.UTC().Format(time.RFC3339Nano)}})
	if err != nil {
		return nil, fmt.Errorf("charges created after: %w", err)
	}
	return list, nil
}

// FindCharge asks the processor for the charge made under key. It implements
// payments.Processor: found is false only when the processor confirms that
// no request with that key was ever executed.
func (c *Client) FindCharge(ctx context.Context, key string) (payments.Charge, bool, error) {
	list, err := c.ChargesByIdempotencyKey(ctx, key)
	if err != nil || len(list) == 0 {
		return payments.Charge{}, false, err
	}
	ch := list[len(list)-1]
	return payments.Charge{ID: ch.ID, Succeeded: ch.Succeeded(), FailureCode: ch.FailureCode, FailureMessage: ch.FailureMessage}, true, nil
}

// RecentCharges implements payments.Processor with ChargesCreatedAfter.
func (c *Client) RecentCharges(ctx context.Context, since time.Time) ([]payments.LedgerCharge, error) {
	list, err := c.ChargesCreatedAfter(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]payments.LedgerCharge, len(list))
	for i, ch := range list {
		out[i] = payments.LedgerCharge{ID: ch.ID, PaymentID: ch.PaymentID, IdempotencyKey: ch.IdempotencyKey,
			Succeeded: ch.Succeeded(), Amount: ch.Amount, CreatedAt: ch.CreatedAt}
	}
	return out, nil
}

// GetCharge returns one charge, or an error wrapping ErrNotFound.
func (c *Client) GetCharge(ctx context.Context, id string) (ChargeObject, error) {
	status, resp, err := c.do(ctx, http.MethodGet, "/v1/charges/"+url.PathEscape(id), "", nil)
	if err != nil {
		return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, err)
	}
	switch status {
	case http.StatusOK:
		var ch ChargeObject
		if err := json.Unmarshal(resp, &ch); err != nil {
			return ChargeObject{}, fmt.Errorf("get charge %s: %w: decode: %w", id, payments.ErrProcessorUnknown, err)
		}
		return ch, nil
	case http.StatusNotFound:
		return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, ErrNotFound)
	}
	return ChargeObject{}, fmt.Errorf("get charge %s: %w", id, classify(status, resp))
}

// list calls GET /v1/charges with a filter.
func (c *Client) list(ctx context.Context, query url.Values) ([]ChargeObject, error) {
	status, resp, err := c.do(ctx, http.MethodGet, "/v1/charges?"+query.Encode(), "", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, classify(status, resp)
	}
	var list struct {
		Data []ChargeObject `json:"data"`
	}
	if err := json.Unmarshal(resp, &list); err != nil {
		return nil, fmt.Errorf("%w: decode list: %w", payments.ErrProcessorUnknown, err)
	}
	if list.Data == nil {
		list.Data = []ChargeObject{}
	}
	return list.Data, nil
}

// do sends one request and reads the whole answer. Any failure to get a
// complete answer — timeout, refused or reset connection, early EOF — wraps
// payments.ErrProcessorUnknown: the request may have been executed.
func (c *Client) do(ctx context.Context, method, path, key string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", payments.ErrProcessorUnknown, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read answer: %w", payments.ErrProcessorUnknown, err)
	}
	return resp.StatusCode, b, nil
}

// classify turns an unexpected status into an error. 5xx, 409 (a concurrent
// request holds the key) and 429 (rate limited) mean nothing definite
// happened yet, so they wrap payments.ErrProcessorUnknown and are retried
// with the same key; any other status is a definite rejection.
func classify(status int, body []byte) error {
	apiErr := decodeError(status, body)
	if status >= 500 || status == http.StatusConflict || status == http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", payments.ErrProcessorUnknown, apiErr)
	}
	return apiErr
}

// decodeError reads the error member of an answer; a body that is not the
// processor's error JSON still yields an APIError carrying the status.
func decodeError(status int, body []byte) *APIError {
	var envelope struct {
		Error APIError `json:"error"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil || envelope.Error.Type == "" {
		return &APIError{Status: status, Type: "unknown", Code: "unknown", Message: http.StatusText(status)}
	}
	envelope.Error.Status = status
	return &envelope.Error
}
