package client

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorMessage(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{
			name: "Detail",
			err:  &Error{Status: 402, Code: "card_declined", Title: "Payment declined", Detail: "Your card was declined."},
			want: "payments api: 402 card_declined: Your card was declined.",
		},
		{
			name: "TitleOnly",
			err:  &Error{Status: 502, Title: "Bad Gateway"},
			want: "payments api: 502: Bad Gateway",
		},
		{
			name: "FieldErrors",
			err: &Error{Status: 400, Code: "invalid_request", Detail: "The request body has invalid fields.",
				Errors: []FieldError{{"amount", "is required"}, {"currency", "is required"}}},
			want: "payments api: 400 invalid_request: The request body has invalid fields. (amount is required; currency is required)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorRetryable(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		status int
		code   string
		want   bool
	}{
		{name: "KeyInUse", status: 409, code: "idempotency_key_in_use", want: true},
		{name: "ServiceUnavailable", status: 503, code: "service_unavailable", want: true},
		{name: "OutcomeUnknown", status: 503, code: "outcome_unknown", want: true},
		{name: "InternalError", status: 500, code: "internal_error", want: true},
		{name: "GatewayTimeout", status: 504, want: true},
		{name: "BadGatewayFromProxy", status: 502, want: true},
		{name: "TooManyRequests", status: 429, want: true},
		{name: "RequestTimeout", status: 408, want: true},
		{name: "ProcessorError", status: 502, code: "processor_error"},
		{name: "NotImplemented", status: 501},
		{name: "Declined", status: 402, code: "card_declined"},
		{name: "PaymentNotRefundable", status: 409, code: "payment_not_refundable"},
		{name: "InvalidRequest", status: 400, code: "invalid_request"},
		{name: "Unauthorized", status: 401, code: "unauthorized"},
		{name: "NotFound", status: 404, code: "not_found"},
		{name: "PayloadTooLarge", status: 413, code: "payload_too_large"},
		{name: "UnsupportedMediaType", status: 415, code: "unsupported_media_type"},
		{name: "KeyMismatch", status: 422, code: "idempotency_key_mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Error{Status: tt.status, Code: tt.code}
			if got := e.Retryable(); got != tt.want {
				t.Errorf("Retryable() of %d %s = %v, want %v", tt.status, tt.code, got, tt.want)
			}
		})
	}
}

func TestErrorHelpers(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		err  *Error
		is   func(*Error) bool
	}{
		{name: "IsDeclined", err: &Error{Status: 402, Code: "insufficient_funds"}, is: (*Error).IsDeclined},
		{name: "IsInvalidRequest", err: &Error{Status: 400, Code: "invalid_request"}, is: (*Error).IsInvalidRequest},
		{name: "IsUnauthorized", err: &Error{Status: 401, Code: "unauthorized"}, is: (*Error).IsUnauthorized},
		{name: "IsNotFound", err: &Error{Status: 404, Code: "not_found"}, is: (*Error).IsNotFound},
		{name: "IsIdempotencyKeyInUse", err: &Error{Status: 409, Code: "idempotency_key_in_use"}, is: (*Error).IsIdempotencyKeyInUse},
		{name: "IsIdempotencyKeyMismatch", err: &Error{Status: 422, Code: "idempotency_key_mismatch"}, is: (*Error).IsIdempotencyKeyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !tt.is(tt.err) {
				t.Errorf("%s(%d %s) = false, want true", tt.name, tt.err.Status, tt.err.Code)
			}
			if tt.is(&Error{Status: 500, Code: "internal_error"}) {
				t.Errorf("%s(500) = true, want false", tt.name)
			}
		})
	}
}

func TestNewError(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name           string
		status         int
		body           string
		header         http.Header
		wantCode       string
		wantTitle      string
		wantDetail     string
		wantRetryAfter time.Duration
	}{
		{
			name:     "Problem",
			status:   409,
			body:     problemJSON(409, "idempotency_key_in_use", "held"),
			header:   http.Header{"Retry-After": {"2"}},
			wantCode: "idempotency_key_in_use", wantTitle: "Conflict", wantDetail: "held", wantRetryAfter: 2 * time.Second,
		},
		{
			name:      "NotAProblem",
			status:    502,
			body:      "<html>bad gateway</html>",
			header:    http.Header{},
			wantTitle: "Bad Gateway", wantDetail: "<html>bad gateway</html>",
		},
		{
			name:      "EmptyBody",
			status:    504,
			header:    http.Header{},
			wantTitle: "Gateway Timeout",
		},
		{
			name:       "LongBody",
			status:     500,
			body:       strings.Repeat("é", 300),
			header:     http.Header{},
			wantTitle:  "Internal Server Error",
			wantDetail: strings.Repeat("é", 100) + "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newError(&reply{status: tt.status, header: tt.header, body: []byte(tt.body)})
			if e.Status != tt.status || e.Code != tt.wantCode || e.Title != tt.wantTitle || e.Detail != tt.wantDetail || e.RetryAfter != tt.wantRetryAfter {
				t.Errorf("newError = %+v, want status %d code %q title %q detail %q retry after %v",
					e, tt.status, tt.wantCode, tt.wantTitle, tt.wantDetail, tt.wantRetryAfter)
			}
		})
	}
}
