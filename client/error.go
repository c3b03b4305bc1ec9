package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Stable error codes of the API, the values of Error.Code that callers most
// often branch on. A decline carries the processor's own code, such as
// CodeCardDeclined or CodeInsufficientFunds.
const (
	CodeUnauthorized           = "unauthorized"
	CodeInvalidRequest         = "invalid_request"
	CodeNotFound               = "not_found"
	CodeIdempotencyKeyMissing  = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid  = "idempotency_key_invalid"
	CodeIdempotencyKeyInUse    = "idempotency_key_in_use"
	CodeIdempotencyKeyMismatch = "idempotency_key_mismatch"
	CodeIdempotencyKeyExpired  = "idempotency_key_expired"
	CodeRateLimited            = "rate_limited"
	CodePaymentNotRefundable   = "payment_not_refundable"
	CodeRefundExceedsPayment   = "refund_exceeds_payment"
	CodeCardDeclined           = "card_declined"
	CodeInsufficientFunds      = "insufficient_funds"
	CodeProcessorError         = "processor_error"
	CodePayloadTooLarge        = "payload_too_large"
	CodeUnsupportedMediaType   = "unsupported_media_type"
	CodeServiceUnavailable     = "service_unavailable"
	CodeOutcomeUnknown         = "outcome_unknown"
	CodeEndpointDisabled       = "endpoint_disabled"
	CodeDeliveryInFlight       = "delivery_in_flight"
	CodeRotationInProgress     = "rotation_in_progress"
	CodeEndpointLimitReached   = "endpoint_limit_reached"
)

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error answer of the API: an RFC 9457 problem with the stable
// Code to branch on. A decline carries the failed Payment (or Refund).
// RetryAfter is the server's Retry-After, zero when it sent none.
type Error struct {
	Type    string       `json:"type"`
	Title   string       `json:"title"`
	Status  int          `json:"status"`
	Detail  string       `json:"detail,omitempty"`
	Code    string       `json:"code"`
	Errors  []FieldError `json:"errors,omitempty"`
	Payment *Payment     `json:"payment,omitempty"`
	Refund  *Refund      `json:"refund,omitempty"`
	// Resource names what an expired key created (idempotency_key_expired):
	// the request was executed once; fetch it from URL.
	Resource *Resource `json:"resource,omitempty"`

	RetryAfter time.Duration `json:"-"`
}

// Resource is what an idempotency key created, and where to fetch it.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	URL  string `json:"url"`
}

// Error describes the problem in one line, field errors included.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "payments api: %d", e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	for i, f := range e.Errors {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %s", sep, f.Field, f.Message)
	}
	if len(e.Errors) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// IsDeclined reports whether the payment or refund was declined or failed: a
// final answer, never worth retrying with the same key.
func (e *Error) IsDeclined() bool { return e.Status == http.StatusPaymentRequired }

// IsInvalidRequest reports whether the request itself was wrong (400); Errors
// names the fields when the body failed validation.
func (e *Error) IsInvalidRequest() bool { return e.Status == http.StatusBadRequest }

// IsUnauthorized reports whether the API key was missing or unknown.
func (e *Error) IsUnauthorized() bool { return e.Status == http.StatusUnauthorized }

// IsNotFound reports whether the resource does not exist for this API key.
func (e *Error) IsNotFound() bool { return e.Status == http.StatusNotFound }

// IsIdempotencyKeyInUse reports whether another request held the key.
func (e *Error) IsIdempotencyKeyInUse() bool {
	return e.Status == http.StatusConflict && e.Code == CodeIdempotencyKeyInUse
}

// IsIdempotencyKeyMismatch reports whether the key was used before for a
// different request; a new key is needed.
func (e *Error) IsIdempotencyKeyMismatch() bool {
	return e.Status == http.StatusUnprocessableEntity && e.Code == CodeIdempotencyKeyMismatch
}

// Retryable reports whether the same request, with the same idempotency key,
// may get a different answer later. Final answers, stored by the server for
// replay, are not retryable: a decline, 502 processor_error, and the 4xx
// errors except 409 idempotency_key_in_use, 408 and 429.
func (e *Error) Retryable() bool {
	switch {
	case e.Status == http.StatusConflict:
		return e.Code == CodeIdempotencyKeyInUse
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status == http.StatusBadGateway && e.Code == CodeProcessorError:
		// The processor confirmed it could not charge: a final, stored answer.
		return false
	case e.Status == http.StatusNotImplemented:
		return false
	default:
		return e.Status >= 500
	}
}

// maxDetail bounds how much of a body that is not a problem lands in Detail.
const maxDetail = 200

// newError decodes the error answer r. A body that is not a problem (from a
// proxy, say) still gives an Error with the HTTP status and a title.
func newError(r *reply) *Error {
	e := &Error{}
	if err := json.Unmarshal(r.body, e); err != nil {
		e = &Error{Detail: snippet(r.body)}
	}
	// The status line is the truth; the body's status member only mirrors it.
	e.Status = r.status
	if e.Title == "" {
		e.Title = http.StatusText(r.status)
	}
	if d, ok := parseRetryAfter(r.header.Get("Retry-After")); ok {
		e.RetryAfter = d
	}
	return e
}

// snippet returns the start of a body as valid, trimmed text.
func snippet(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body), ""))
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
