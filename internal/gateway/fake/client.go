// Package fake is the adapter of the fake processor, the stand-in that
// tools/fakeprocessor serves (PROCESSOR=fake): its Client makes each kind's
// processor calls over HTTP, one file a kind, on plumbing of its own:
// classifying answers, lookups by key, the fence, the ledger. Adapter
// declares it to the service, with its settings and its webhooks.
//
// A kind's call (Charge, say) turns every answer into one of three things:
// a definite outcome (an operation that succeeded or was declined, or a
// request the processor refused, so that nothing was made),
// operation.ErrKeyClosed when the downstream key was closed before anything
// was made under it, or an error wrapping operation.ErrProcessorUnknown when
// the outcome cannot be known: a timeout, a connection error, a 5xx, a 409
// or 429, or an answer that cannot be read. The caller retries those with
// the same idempotency key, or asks the processor what happened.
//
// The questions the caller asks (a kind's lookup, fence and ledger:
// FindCharge, say) either get a definite 200 answer or fail with an error
// wrapping operation.ErrProcessorUnknown, to be asked again later.
package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/tracing"
)

// maxResponseBytes bounds what is read of a response body.
const maxResponseBytes = 1 << 20

// DefaultPageSize is how many rows a ledger page asks for when
// Client.PageSize is zero: the processor's largest page.
const DefaultPageSize = 1000

// Client calls the processor's HTTP API. It is safe for concurrent use once
// its fields are set.
type Client struct {
	// PageSize is the limit of one ledger page, from 1 to 1000; zero means
	// DefaultPageSize.
	PageSize int

	baseURL string
	http    *http.Client
}

// New returns a client for the processor at baseURL, such as
// "http://127.0.0.1:8090". timeout bounds each call as a whole.
func New(baseURL string, timeout time.Duration) *Client {
	return &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		http:    gateway.Client(timeout, nil),
	}
}

// Paced returns a copy of c whose every request waits for its turn of pace
// (gateway.Paced); nil pace is no limit.
func (c *Client) Paced(pace *gateway.Pace) *Client {
	paced := *c
	paced.http = &http.Client{Timeout: c.http.Timeout, Transport: gateway.Paced(c.http.Transport, pace)}
	return &paced
}

// Traced returns a copy of c whose every call is a client span, a child of
// the span in its context, and sends that span's context to the processor
// as traceparent, so that the processor's work joins the operation's trace.
// tp nil means the global provider.
func (c *Client) Traced(tp trace.TracerProvider) *Client {
	traced := *c
	traced.http = &http.Client{Timeout: c.http.Timeout, Transport: tracing.Transport(c.http.Transport, tp)}
	return &traced
}

// APIError is an error answer of the processor. It is returned wrapped in
// operation.ErrProcessorUnknown or operation.ErrKeyClosed when it means one of
// those; errors.As finds it either way.
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

// codeKeyClosed is the error code of an operation refused on a closed key.
const codeKeyClosed = "idempotency_key_closed"

// refusal classifies the answer of a POST that neither made an operation
// nor was a decline. A 4xx is a definite refusal, returned as an Outcome
// with no ID (nothing was made), except a closed key, which is
// operation.ErrKeyClosed, and the statuses classify calls unknown.
func refusal(status int, body []byte) (operation.Outcome, error) {
	err := classify(status, body)
	var apiErr *APIError
	switch {
	case errors.Is(err, operation.ErrProcessorUnknown):
		return operation.Outcome{}, err
	case !errors.As(err, &apiErr):
		// Unreachable: classify returns an *APIError otherwise.
		return operation.Outcome{}, fmt.Errorf("%w: %w", operation.ErrProcessorUnknown, err)
	case apiErr.Code == codeKeyClosed:
		return operation.Outcome{}, fmt.Errorf("%w: %w", operation.ErrKeyClosed, apiErr)
	}
	return operation.Outcome{FailureCode: apiErr.Code, FailureMessage: apiErr.Message}, nil
}

// classify turns an unexpected status into an error. 5xx, 408 (the request
// timed out), 409 (a concurrent request holds the key), 429 (rate limited),
// anything that is not a 4xx, and a 4xx whose body is not the processor's
// error (a proxy's page says nothing of what the processor did) mean
// nothing definite is known, so they wrap operation.ErrProcessorUnknown and
// are retried with the same key. Any other 4xx is a definite rejection, an
// *APIError.
func classify(status int, body []byte) error {
	apiErr, readable := decodeError(status, body)
	switch {
	case !readable, status < 400 || status >= 500,
		status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w", operation.ErrProcessorUnknown, apiErr)
	}
	return apiErr
}

// decodeError reads the error member of an answer and reports whether it
// was there; a body that is not the processor's error JSON still yields an
// APIError carrying the status.
func decodeError(status int, body []byte) (*APIError, bool) {
	var envelope struct {
		Error APIError `json:"error"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil || envelope.Error.Type == "" || envelope.Error.Code == "" {
		return &APIError{Status: status, Type: "unknown", Code: "unknown", Message: http.StatusText(status)}, false
	}
	envelope.Error.Status = status
	return &envelope.Error, true
}

// postJSON sends v as the JSON body of a POST to path.
func (c *Client) postJSON(ctx context.Context, path, key string, v any) (int, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, nil, fmt.Errorf("encode: %w", err)
	}
	return c.do(ctx, http.MethodPost, path, key, body)
}

// do sends one request and reads the whole answer. Any failure to get a
// complete answer — timeout, refused or reset connection, early EOF — wraps
// operation.ErrProcessorUnknown: the request may have been executed. A 429,
// which executed nothing, is operation.ErrNotSent (gateway.TooManyRequests),
// as is a request that had no turn under the processor's rate limit.
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
		return 0, nil, fmt.Errorf("%w: %w", operation.ErrProcessorUnknown, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read answer: %w", operation.ErrProcessorUnknown, err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		apiErr, _ := decodeError(resp.StatusCode, b)
		return 0, nil, gateway.TooManyRequests(apiErr, resp.Header)
	}
	return resp.StatusCode, b, nil
}
