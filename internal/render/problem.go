// Package render makes the bodies the API answers with and the worker stores:
// problem+json (RFC 9457) with the one table that maps every error to its
// status and code (the generic rules, and each kind's), and the final
// responses of operations that are stored on idempotency keys and replayed
// byte for byte. The API and the worker both use it, so that a live answer
// and a stored one read the same.
package render

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/tenants"
)

// ProblemTypeBase prefixes every problem's code to make its type URI.
const ProblemTypeBase = "https://payments.example/problems/"

// Problem is an RFC 9457 problem detail with the stable code clients branch on.
type Problem struct {
	Type   string                 `json:"type"`
	Title  string                 `json:"title"`
	Status int                    `json:"status"`
	Detail string                 `json:"detail,omitempty"`
	Code   string                 `json:"code"`
	Errors []operation.FieldError `json:"errors,omitempty"`
	// Resource is what an expired key created, to be fetched instead.
	Resource *ResourceLink `json:"resource,omitempty"`
	// Member and Object are the failed operation a 402 or 502 carries, as a
	// member named for its type ("payment"): see MarshalJSON.
	Member string `json:"-"`
	Object any    `json:"-"`
}

// NewProblem is a problem with its type URI made from code.
func NewProblem(status int, code, title, detail string) Problem {
	return Problem{Type: ProblemTypeBase + code, Title: title, Status: status, Detail: detail, Code: code}
}

// Errors of the HTTP layer itself, about the request's shape; the domain's
// come from its packages. They are here so that the table below is the one
// place that maps every error to its status.
var (
	ErrKeyMissing       = errors.New("this request needs an Idempotency-Key header")
	ErrTooLarge         = errors.New("the request body is larger than 64 KiB")
	ErrMediaType        = errors.New("the request body must be application/json")
	ErrEncoding         = errors.New("the request body must be sent uncompressed, without Content-Encoding")
	ErrBodyUnreadable   = errors.New("the request body could not be read in full")
	ErrStorable         = errors.New("the request holds a value that cannot be stored, such as a NUL character or invalid UTF-8")
	ErrRouteNotFound    = errors.New("no such endpoint")
	ErrMethodNotAllowed = errors.New("method not allowed on this endpoint")
	ErrRateLimited      = errors.New("this API key sends idempotent POST requests faster than its limit")
	ErrAuthThrottled    = errors.New("too many failed authentications from this address: wait before trying again")
	ErrWebhookSignature = errors.New("the webhook's signature could not be verified with the processor's secret, or its timestamp is more than five minutes from now")
)

// InvalidRequestError is a body that is not the JSON the endpoint takes.
type InvalidRequestError struct{ Detail string }

func (e *InvalidRequestError) Error() string { return e.Detail }

// Renderer holds the one table that maps every error to its status and code
// (the generic rules below, each kind's and the webhook endpoints'), and the
// URL of every resource a key creates.
type Renderer struct {
	rules     []operation.ErrorRule
	resources map[string]operation.Resource
}

// New is the renderer of the kinds, and of the resources and rules of what
// else the API serves (the webhook endpoints).
func New(kinds *operation.Registry, resources []operation.Resource, rules []operation.ErrorRule) *Renderer {
	r := &Renderer{rules: append(append(append([]operation.ErrorRule{}, genericRules...), kinds.ErrorRules()...), rules...),
		resources: map[string]operation.Resource{}}
	for _, res := range append(kinds.Resources(), resources...) {
		r.resources[res.Type] = res
	}
	return r
}

// Rules are every rule of the table, for the drift tests of the API
// document.
func (r *Renderer) Rules() []operation.ErrorRule { return r.rules }

// genericRules are the rules of every error that is no kind's own.
var genericRules = []operation.ErrorRule{
	rule(tenants.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", "Missing or unknown API key",
		"Send your API key as Authorization: Bearer <key>."),
	rule(idempotency.ErrTenantGone, http.StatusUnauthorized, "unauthorized", "Missing or unknown API key",
		"The API key's tenant no longer exists."),
	rule(ErrKeyMissing, http.StatusBadRequest, "idempotency_key_missing", "Idempotency-Key header required",
		"Send a unique Idempotency-Key header, such as a UUID, with every POST, and the same one when you retry it."),
	rule(idempotency.ErrKeyInvalid, http.StatusBadRequest, "idempotency_key_invalid", "Invalid Idempotency-Key", ""),
	rule(idempotency.ErrKeyInUse, http.StatusConflict, "idempotency_key_in_use", "Idempotency key in use",
		"Another request with this Idempotency-Key is in progress. Retry after the time in Retry-After."),
	rule(idempotency.ErrKeyMismatch, http.StatusUnprocessableEntity, "idempotency_key_mismatch", "Idempotency key reused with a different request",
		"This Idempotency-Key was first used with a different method, path or body. Use a new key for a new request."),
	rule(idempotency.ErrKeyExpired, http.StatusGone, "idempotency_key_expired", "Idempotency key expired",
		"This Idempotency-Key was used, and its stored response has expired: the request was executed and is not executed again. Fetch what it created, or use a new key for a new request."),
	rule(idempotency.ErrNotFound, http.StatusNotFound, "not_found", "Not found", "No such idempotency key."),
	rule(ErrRouteNotFound, http.StatusNotFound, "not_found", "Not found", ""),
	rule(ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed", ""),
	rule(ErrTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", ""),
	rule(ErrRateLimited, http.StatusTooManyRequests, "rate_limited", "Too many requests",
		"This API key sends idempotent POST requests (new keys and retries alike) faster than its limit. Retry after the time in Retry-After, with the same Idempotency-Key."),
	rule(ErrWebhookSignature, http.StatusBadRequest, "webhook_signature_invalid", "Webhook signature invalid", ""),
	rule(operation.ErrEventMalformed, http.StatusBadRequest, "webhook_payload_invalid", "Webhook payload invalid", ""),
	rule(ErrAuthThrottled, http.StatusTooManyRequests, "authentication_throttled", "Too many failed authentications", ""),
	rule(ErrMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type", ""),
	rule(ErrEncoding, http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type", ""),
	// The causes wrapped in these two (a network error, the database's
	// refusal) are never shown: a fixed detail.
	rule(ErrBodyUnreadable, http.StatusBadRequest, "invalid_request", "Invalid request", "The request body could not be read in full."),
	rule(ErrStorable, http.StatusBadRequest, "invalid_request", "Invalid request",
		"The request holds a value that cannot be stored, such as a NUL character or invalid UTF-8."),
}

// rule is one rule of the table: detail, when set, replaces the error's own
// text.
func rule(err error, status int, code, title, detail string) operation.ErrorRule {
	return operation.ErrorRule{Err: err, Status: status, Code: code, Title: title, Detail: detail}
}

// For maps err to its problem: a validation error, an invalid body, a
// resource not found, an expired key (naming what it created), or a rule of
// the table. It reports false for an error it does not know.
func (r *Renderer) For(err error) (Problem, bool) {
	var (
		validation *operation.ValidationError
		invalid    *InvalidRequestError
		notFound   *operation.NotFoundError
		expired    *idempotency.ExpiredError
	)
	switch {
	case errors.As(err, &validation):
		p := NewProblem(http.StatusBadRequest, "invalid_request", "Invalid request", "The request body has invalid fields.")
		p.Errors = validation.Fields
		return p, true
	case errors.As(err, &invalid):
		return NewProblem(http.StatusBadRequest, "invalid_request", "Invalid request", invalid.Detail), true
	case errors.As(err, &notFound):
		return NewProblem(http.StatusNotFound, "not_found", "Not found", "No such "+notFound.What+"."), true
	case errors.As(err, &expired):
		p, _ := r.For(idempotency.ErrKeyExpired)
		// A type no longer declared is named without its URL.
		if p.Resource, err = r.ResourceOf(expired.Resource); err != nil {
			p.Resource = &ResourceLink{Type: expired.Resource.Type, ID: expired.Resource.ID}
		}
		return p, true
	}
	for _, e := range r.rules {
		if errors.Is(err, e.Err) {
			detail := e.Detail
			if detail == "" {
				detail = upperFirst(err.Error()) + "."
			}
			return NewProblem(e.Status, e.Code, e.Title, detail), true
		}
	}
	return Problem{}, false
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Encode is the one JSON encoding of every body, stored or not.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this package's own types are encoded
	}
	return append(b, '\n')
}
