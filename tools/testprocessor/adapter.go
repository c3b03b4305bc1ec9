// Package testprocessor declares a processor for tests only, which no list
// of the service names, as tools/testkind is a kind for tests only. It is
// shaped unlike the fake processor and Stripe, as a forker's may be (Adyen's
// Checkout API is the model): it cannot be asked what was made under a key
// (it is asked by making the call again under the key, while it keeps
// keys), it has no fence and no ledger, it settles refunds only later, by
// its webhook, and its webhooks come in batches, each event signed by an
// HMAC over fields inside the JSON, answered with the text [accepted]. The
// machinery's tests run against it. Server is the processor itself, in
// memory, over real HTTP; Adapter and Settings declare it, and Client
// makes the kinds' calls at it.
package testprocessor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/internal/secret"
)

// Adapter declares the test processor; no list names it, so a test sets
// its Settings on a process's configuration itself.
var Adapter = gateway.Adapter{
	Name:     "testprocessor",
	Summary:  "a processor for tests only, without a lookup by query, a fence or a ledger",
	Settings: func() gateway.Settings { return &Settings{} },
}

// Settings are the test processor's settings.
type Settings struct {
	URL string `envconfig:"TESTPROCESSOR_URL" desc:"the test processor (Server.URL)"`
	// HMACKey signs each event of its webhooks.
	HMACKey secret.String `envconfig:"TESTPROCESSOR_HMAC_KEY" desc:"the key of the HMAC each webhook event carries"`
	// KeyRetention is how long the processor keeps a key: the calls made
	// again under it are answered with the first answer for that long.
	KeyRetention time.Duration `envconfig:"TESTPROCESSOR_KEY_RETENTION" default:"168h" desc:"how long the processor keeps its idempotency keys"`
	// Lookup is how it can be asked what was made under a key: replay (the
	// default) or none.
	Lookup operation.Lookup `envconfig:"TESTPROCESSOR_LOOKUP" default:"replay" desc:"replay or none"`
}

// paymentMethods is the test processor's payment method tokens: tok_visa
// is authorised, tok_refused refused.
var paymentMethods = regexp.MustCompile(`^tok_[a-z]+$`)

// Processor implements gateway.Settings: no lookup by query, no fence, no
// ledger, refunds settled by webhook.
func (s *Settings) Processor() operation.Processor {
	return operation.Processor{Name: Adapter.Name, Lookup: s.Lookup, KeyRetention: s.KeyRetention,
		ByWebhook: []string{refunds.Names.Type}, PaymentMethod: operation.Format{Pattern: paymentMethods, Example: "tok_visa"}}
}

// Calls implements gateway.Settings: the Client of the processor at URL.
func (s *Settings) Calls(opts gateway.Options) (any, error) {
	if s.URL == "" {
		return nil, fmt.Errorf("TESTPROCESSOR_URL is required")
	}
	return &Client{url: strings.TrimRight(s.URL, "/"), http: gateway.Client(opts.Timeout, opts.Pace)}, nil
}

// Webhooks implements gateway.Settings.
func (s *Settings) Webhooks() (gateway.Webhooks, error) { return webhooks{key: []byte(s.HMACKey)}, nil }

// Client makes the payments' and the refunds' one call each at the test
// processor; it has no lookup, fence or ledger to call.
type Client struct {
	url  string
	http *http.Client
}

// Charges are the calls the client makes for charges: the charge alone.
func (c *Client) Charges() operation.Calls[payments.ChargeRequest] {
	return operation.Calls[payments.ChargeRequest]{Make: c.Charge}
}

// Refunds are the calls the client makes for refunds: the refund alone.
func (c *Client) Refunds() operation.Calls[refunds.Request] {
	return operation.Calls[refunds.Request]{Make: c.Refund}
}

// amount is a sum of money as the processor writes it.
type amount struct {
	Value    int64  `json:"value"`
	Currency string `json:"currency"`
}

// paymentRequest is the body of POST /payments.
type paymentRequest struct {
	MerchantReference string `json:"merchantReference"`
	Amount            amount `json:"amount"`
	PaymentMethod     string `json:"paymentMethod"`
}

// paymentResponse is its answer.
type paymentResponse struct {
	PSPReference  string `json:"pspReference"`
	ResultCode    string `json:"resultCode"`
	RefusalReason string `json:"refusalReason"`
}

// refundRequest is the body of POST /payments/{psp}/refunds.
type refundRequest struct {
	MerchantReference string `json:"merchantReference"`
	Amount            amount `json:"amount"`
}

// refundResponse is its answer: always received, settled by webhook.
type refundResponse struct {
	PSPReference string `json:"pspReference"`
	Status       string `json:"status"`
}

// Charge implements payments.Processor: Authorised is a success, Refused a
// decline; a 422 is a definite refusal, and anything else unknown.
func (c *Client) Charge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, error) {
	var answer paymentResponse
	status, err := c.post(ctx, "/payments", req.IdempotencyKey, paymentRequest{MerchantReference: req.IdempotencyKey,
		Amount: amount{Value: req.Amount, Currency: req.Currency}, PaymentMethod: req.PaymentMethod}, &answer)
	switch {
	case err != nil:
		return operation.Outcome{}, err
	case status == http.StatusUnprocessableEntity:
		return operation.Outcome{FailureCode: "validation", FailureMessage: "the processor refused the request"}, nil
	case status != http.StatusOK || answer.PSPReference == "":
		return operation.Outcome{}, gateway.Unknownf("payment answered %d", status)
	case answer.ResultCode == "Authorised":
		return operation.Outcome{ID: answer.PSPReference, Succeeded: true}, nil
	case answer.ResultCode == "Refused":
		return operation.Outcome{ID: answer.PSPReference, FailureCode: "refused", FailureMessage: answer.RefusalReason}, nil
	}
	return operation.Outcome{}, gateway.Unknownf("payment %s is %s", answer.PSPReference, answer.ResultCode)
}

// Refund implements refunds.Processor: the processor answers received, and
// settles the refund later by its webhook, so the outcome waits.
func (c *Client) Refund(ctx context.Context, req refunds.Request) (operation.Outcome, error) {
	var answer refundResponse
	status, err := c.post(ctx, "/payments/"+url.PathEscape(req.ChargeID)+"/refunds", req.IdempotencyKey,
		refundRequest{MerchantReference: req.IdempotencyKey, Amount: amount{Value: req.Amount, Currency: req.Currency}}, &answer)
	switch {
	case err != nil:
		return operation.Outcome{}, err
	case status == http.StatusUnprocessableEntity:
		return operation.Outcome{FailureCode: "validation", FailureMessage: "the processor refused the refund"}, nil
	case status != http.StatusCreated || answer.Status != "received" || answer.PSPReference == "":
		return operation.Outcome{}, gateway.Unknownf("refund answered %d %q", status, answer.Status)
	}
	return operation.Outcome{ID: answer.PSPReference, Succeeded: true, Waiting: true}, nil
}

// post sends body under key and reads a 2xx answer into dst; a lost answer
// is unknown.
func (c *Client) post(ctx context.Context, path, key string, body, dst any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, gateway.Unknown(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, gateway.Unknown(err)
	}
	if resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(answer, dst); err != nil {
			return 0, gateway.Unknownf("unreadable answer: %v", err)
		}
	}
	return resp.StatusCode, nil
}
