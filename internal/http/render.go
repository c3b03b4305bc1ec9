package http

import (
	"net/http"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// Renderer writes the final responses that the payments package stores on
// idempotency keys, with the same encoding and error table as live answers.
// It implements payments.Renderer.
type Renderer struct{}

var _ payments.Renderer = Renderer{}

// Payment is 201 with the payment when it succeeded, else a 402 problem
// (502 when the processor could not charge) carrying the payment.
func (Renderer) Payment(p payments.Payment) idempotency.Response {
	location := paymentLocation(p.ID)
	if p.Status == payments.StatusSucceeded {
		return stored(http.StatusCreated, "application/json", location, encode(p))
	}
	status, title := http.StatusPaymentRequired, "Payment declined"
	code := deref(p.FailureCode, "payment_failed")
	if code == payments.FailureProcessorError {
		status, title = http.StatusBadGateway, "Processor error"
	}
	problem := newProblem(status, code, title, deref(p.FailureMessage, "The payment failed."))
	problem.Payment = &p
	return stored(status, "application/problem+json", location, encode(problem))
}

// Refund is 201 with the refund when it succeeded, else a 402 problem (502
// when the service gave up on it) carrying the refund.
func (Renderer) Refund(r payments.Refund) idempotency.Response {
	location := refundLocation(r.ID)
	if r.Status == payments.StatusSucceeded {
		return stored(http.StatusCreated, "application/json", location, encode(r))
	}
	status, title, detail := http.StatusPaymentRequired, "Refund failed", "The processor refused the refund."
	code := deref(r.FailureCode, "refund_failed")
	if code == payments.FailureProcessorError {
		status, title = http.StatusBadGateway, "Processor error"
		detail = "The processor could not confirm the refund before the deadline. Nothing was refunded, and nothing will be."
	}
	problem := newProblem(status, code, title, detail)
	problem.Refund = &r
	return stored(status, "application/problem+json", location, encode(problem))
}

// Error is the problem of a refusal that is final and stored.
func (Renderer) Error(err error) idempotency.Response {
	p, ok := problemFor(err)
	if !ok {
		p = newProblem(http.StatusInternalServerError, "internal_error", "Internal server error", "An unexpected error occurred.")
	}
	return stored(p.Status, "application/problem+json", "", encode(p))
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
