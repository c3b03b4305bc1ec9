package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/tenants"
)

// ProblemTypeBase prefixes every problem's code to make its type URI.
const ProblemTypeBase = "https://payments.example/problems/"

// Problem is an RFC 9457 problem detail with the stable code clients branch on.
type Problem struct {
	Type    string                `json:"type"`
	Title   string                `json:"title"`
	Status  int                   `json:"status"`
	Detail  string                `json:"detail,omitempty"`
	Code    string                `json:"code"`
	Errors  []payments.FieldError `json:"errors,omitempty"`
	Payment *payments.Payment     `json:"payment,omitempty"`
	Refund  *payments.Refund      `json:"refund,omitempty"`
	// Resource is what an expired key created, to be fetched instead.
	Resource *resource `json:"resource,omitempty"`
}

func newProblem(status int, code, title, detail string) Problem {
	return Problem{Type: ProblemTypeBase + code, Title: title, Status: status, Detail: detail, Code: code}
}

// Errors of the HTTP layer itself; the domain's come from its packages.
var (
	errKeyMissing       = errors.New("this request needs an Idempotency-Key header")
	errTooLarge         = errors.New("the request body is larger than 64 KiB")
	errMediaType        = errors.New("the request body must be application/json")
	errEncoding         = errors.New("the request body must be sent uncompressed, without Content-Encoding")
	errBodyUnreadable   = errors.New("the request body could not be read in full")
	errStorable         = errors.New("the request holds a value that cannot be stored, such as a NUL character or invalid UTF-8")
	errRouteNotFound    = errors.New("no such endpoint")
	errMethodNotAllowed = errors.New("method not allowed on this endpoint")
)

// invalidRequestError is a body that is not the JSON the endpoint takes.
type invalidRequestError struct{ detail string }

func (e *invalidRequestError) Error() string { return e.detail }

// errorTable maps each error a handler may return to its status, code and
// title: the one place where that decision is made.
var errorTable = []struct {
	err    error
	status int
	code   string
	title  string
	// detail, when set, replaces the error's own text.
	detail string
}{
	{tenants.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", "Missing or unknown API key",
		"Send your API key as Authorization: Bearer <key>."},
	{errKeyMissing, http.StatusBadRequest, "idempotency_key_missing", "Idempotency-Key header required",
		"Send a unique Idempotency-Key header, such as a UUID, with every POST, and the same one when you retry it."},
	{idempotency.ErrKeyInvalid, http.StatusBadRequest, "idempotency_key_invalid", "Invalid Idempotency-Key", ""},
	{idempotency.ErrKeyInUse, http.StatusConflict, "idempotency_key_in_use", "Idempotency key in use",
		"Another request with this Idempotency-Key is in progress. Retry after the time in Retry-After."},
	{idempotency.ErrKeyMismatch, http.StatusUnprocessableEntity, "idempotency_key_mismatch", "Idempotency key reused with a different request",
		"This Idempotency-Key was first used with a different method, path or body. Use a new key for a new request."},
	{idempotency.ErrKeyExpired, http.StatusGone, "idempotency_key_expired", "Idempotency key expired",
		"This Idempotency-Key was used, and its stored response has expired: the request was executed and is not executed again. Fetch what it created, or use a new key for a new request."},
	{idempotency.ErrNotFound, http.StatusNotFound, "not_found", "Not found", "No such idempotency key."},
	{payments.ErrNotFound, http.StatusNotFound, "not_found", "Not found", "No such payment."},
	{payments.ErrRefundNotFound, http.StatusNotFound, "not_found", "Not found", "No such refund."},
	{payments.ErrEventNotFound, http.StatusNotFound, "not_found", "Not found", "No such event."},
	{payments.ErrNotRefundable, http.StatusConflict, "payment_not_refundable", "Payment not refundable", ""},
	{payments.ErrRefundExceedsPayment, http.StatusBadRequest, "refund_exceeds_payment", "Refund exceeds payment", ""},
	{errRouteNotFound, http.StatusNotFound, "not_found", "Not found", ""},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed", ""},
	{errTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", ""},
	{errRateLimited, http.StatusTooManyRequests, "rate_limited", "Too many requests",
		"This API key sends requests that create idempotency keys faster than its limit. Retry after the time in Retry-After, with the same Idempotency-Key."},
	{errMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type", ""},
	{errEncoding, http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type", ""},
	{errBodyUnreadable, http.StatusBadRequest, "invalid_request", "Invalid request", ""},
	{errStorable, http.StatusBadRequest, "invalid_request", "Invalid request", ""},
}

// problemFor maps err to its problem: a validation error, an invalid body,
// or an entry of errorTable. It reports false for an error it does not know.
func problemFor(err error) (Problem, bool) {
	var (
		validation *payments.ValidationError
		invalid    *invalidRequestError
	)
	switch {
	case errors.As(err, &validation):
		p := newProblem(http.StatusBadRequest, "invalid_request", "Invalid request", "The request body has invalid fields.")
		p.Errors = validation.Fields
		return p, true
	case errors.As(err, &invalid):
		return newProblem(http.StatusBadRequest, "invalid_request", "Invalid request", invalid.detail), true
	}
	var expired *idempotency.ExpiredError
	if errors.As(err, &expired) {
		p, _ := problemFor(idempotency.ErrKeyExpired)
		p.Resource = resourceOf(expired.Resource)
		return p, true
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			detail := e.detail
			if detail == "" {
				detail = upperFirst(err.Error()) + "."
			}
			return newProblem(e.status, e.code, e.title, detail), true
		}
	}
	return Problem{}, false
}

// writeError answers with the problem err maps to. An unreachable database
// is 503 with Retry-After: nothing was executed. An error it does not know
// becomes a generic 500, logged with the request id; nothing internal leaks.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if database.IsDataException(err) {
		// The database refused a value the client sent: the client's error,
		// mapped here once for every query.
		err = fmt.Errorf("%w: %v", errStorable, err)
	}
	// Known errors come first: they are the client's (a body that could not
	// be read included), whatever network error lies beneath them.
	p, known := problemFor(err)
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client went away; there is no one to answer
	case !known && database.IsUnavailable(err):
		s.Logger.Warn("database unavailable", "request_id", middleware.GetReqID(r.Context()), "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
		writeProblem(w, newProblem(http.StatusServiceUnavailable, "service_unavailable", "Service unavailable",
			"The database cannot be reached; nothing was executed. Retry with the same Idempotency-Key."))
		return
	case !known:
		s.Logger.Error("internal error", "request_id", middleware.GetReqID(r.Context()), "method", r.Method,
			"path", r.URL.Path, "err", err)
		writeProblem(w, newProblem(http.StatusInternalServerError, "internal_error", "Internal server error",
			"An unexpected error occurred. It has been logged with the request id "+middleware.GetReqID(r.Context())+"."))
		return
	}
	switch {
	case errors.Is(err, idempotency.ErrKeyInUse):
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
		s.count(r, func(m *keyMetrics) *prometheus.CounterVec { return m.inUse })
	case errors.Is(err, idempotency.ErrKeyMismatch):
		s.count(r, func(m *keyMetrics) *prometheus.CounterVec { return m.mismatches })
	case errors.Is(err, errRateLimited):
		s.count(r, func(m *keyMetrics) *prometheus.CounterVec { return m.limited })
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
	}
	writeProblem(w, p)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func writeProblem(w http.ResponseWriter, p Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	w.Write(encode(p)) //nolint:errcheck
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(encode(v)) //nolint:errcheck
}

// encode is the one JSON encoding of every body, stored or not.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this package's own types are encoded
	}
	return append(b, '\n')
}
