package render

import (
	"net/http"

	"github.com/example/payments/internal/endpoints"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// Renderer makes the final responses that the payments package stores on
// idempotency keys, with the same encoding and error table as live answers.
// It implements payments.Renderer.
type Renderer struct{}

var (
	_ payments.Renderer  = Renderer{}
	_ endpoints.Renderer = Renderer{}
)

// Endpoint is the webhook endpoint with status, without its secret: a
// stored response never holds one.
func (Renderer) Endpoint(status int, e endpoints.Endpoint) idempotency.Response {
	e.Secret = ""
	return stored(status, "application/json", EndpointLocation(e.ID), Encode(e))
}

// Delivery is the webhook delivery with status.
func (Renderer) Delivery(status int, d endpoints.Delivery) idempotency.Response {
	return stored(status, "application/json", EndpointLocation(d.Endpoint)+"/deliveries", Encode(d))
}

// Payment is 201 with the payment when it succeeded, else a 402 problem
// (502 when the processor could not charge) carrying the payment.
func (Renderer) Payment(p payments.Payment) idempotency.Response {
	location := PaymentLocation(p.ID)
	if p.Status == payments.StatusSucceeded {
		return stored(http.StatusCreated, "application/json", location, Encode(p))
	}
	status, title := http.StatusPaymentRequired, "Payment declined"
	code := deref(p.FailureCode, "payment_failed")
	if code == payments.FailureProcessorError {
		status, title = http.StatusBadGateway, "Processor error"
	}
	problem := NewProblem(status, code, title, deref(p.FailureMessage, "The payment failed."))
	problem.Payment = &p
	return stored(status, "application/problem+json", location, Encode(problem))
}

// Refund is 201 with the refund when it succeeded, else a 402 problem (502
// when the service gave up on it) carrying the refund.
func (Renderer) Refund(r payments.Refund) idempotency.Response {
	location := RefundLocation(r.ID)
	if r.Status == payments.StatusSucceeded {
		return stored(http.StatusCreated, "application/json", location, Encode(r))
	}
	status, title, detail := http.StatusPaymentRequired, "Refund failed", "The processor refused the refund."
	code := deref(r.FailureCode, "refund_failed")
	if code == payments.FailureProcessorError {
		status, title = http.StatusBadGateway, "Processor error"
		detail = "The processor could not confirm the refund before the deadline. Nothing was refunded, and nothing will be."
	}
	problem := NewProblem(status, code, title, detail)
	problem.Refund = &r
	return stored(status, "application/problem+json", location, Encode(problem))
}

// Error is the problem of a refusal that is final and stored.
func (Renderer) Error(err error) idempotency.Response {
	p, ok := For(err)
	if !ok {
		p = NewProblem(http.StatusInternalServerError, "internal_error", "Internal server error", "An unexpected error occurred.")
	}
	return stored(p.Status, "application/problem+json", "", Encode(p))
}

func stored(status int, contentType, location string, body []byte) idempotency.Response {
	header := map[string]string{"Content-Type": contentType}
	if location != "" {
		header["Location"] = location
	}
	return idempotency.Response{Status: status, Header: header, Body: body}
}

func deref(s *string, otherwise string) string {
	if s == nil {
		return otherwise
	}
	return *s
}

// Resource is what a key created, with where to fetch it.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	URL  string `json:"url"`
}

// ResourceOf names a key's resource and its URL; nil when it created none.
func ResourceOf(r idempotency.Resource) *Resource {
	var url string
	switch r.Type {
	case payments.PaymentResourceType:
		url = PaymentLocation(r.ID)
	case payments.RefundResourceType:
		url = RefundLocation(r.ID)
	case endpoints.ResourceType:
		url = EndpointLocation(r.ID)
	default:
		return nil
	}
	return &Resource{Type: r.Type, ID: r.ID, URL: url}
}

// PaymentLocation is the URL of a payment.
func PaymentLocation(id string) string { return "/v1/payments/" + id }

// EndpointLocation is the URL of a webhook endpoint.
func EndpointLocation(id string) string { return "/v1/webhook_endpoints/" + id }

// RefundLocation is the URL of a refund.
func RefundLocation(id string) string { return "/v1/refunds/" + id }
