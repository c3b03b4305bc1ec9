// Package refunds declares the refund, one kind of operation (see package
// operation): POST /v1/payments/{id}/refunds records it, and a refund at the
// processor settles it, through the same machinery as a payment: retry
// budget, reconciliation and a fenced give-up. Its phases are started →
// refund_created → finished. A refund takes from its payment (package
// payments): its first phase locks the payment to decide what is left, and
// its outcome counts on the payment's amount_refunded.
package refunds

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
)

// Names are the refund's names, from which the machinery derives the rest.
var Names = operation.Names{Type: "refund", Prefix: "re_", Path: "/v1/refunds", Table: "refunds", Object: "refund", Done: "refunded"}

// Reasons are the reasons a refund may give.
var Reasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

var (
	// ErrNotRefundable reports a refund of a payment that did not succeed.
	ErrNotRefundable = errors.New("only a succeeded payment can be refunded")
	// ErrExceedsPayment reports a refund larger than what is left.
	ErrExceedsPayment = errors.New("the refund exceeds what is left to refund")
	// ErrNotFound reports a refund that does not exist for the tenant.
	ErrNotFound = operation.NotFound("refund")
)

// rules are the refusals of a refund's first phase: final answers, stored on
// the key and replayed.
var rules = []operation.ErrorRule{
	{Err: ErrNotRefundable, Status: http.StatusConflict, Code: "payment_not_refundable", Title: "Payment not refundable"},
	{Err: ErrExceedsPayment, Status: http.StatusBadRequest, Code: "refund_exceeds_payment", Title: "Refund exceeds payment"},
}

// Refund is a refund: what the API shows of it (the client's type, so that
// the two cannot drift apart), and whose it is.
type Refund struct {
	client.Refund

	TenantID string `json:"-"`
	// KeyID is the idempotency key that created the refund; nil once reaped.
	KeyID *int64 `json:"-"`
}

// NewRefund is the request to refund a payment.
type NewRefund struct {
	// Amount defaults to what is left to refund.
	Amount *int64  `json:"amount"`
	Reason *string `json:"reason"`
}

// Validate checks every field and reports all that are wrong at once.
func (r NewRefund) Validate() error {
	var errs []operation.FieldError
	if r.Amount != nil && (*r.Amount < payments.MinAmount || *r.Amount > payments.MaxAmount) {
		errs = append(errs, operation.FieldError{Field: "amount",
			Message: fmt.Sprintf("must be an integer from %d to %d, in minor units", payments.MinAmount, payments.MaxAmount)})
	}
	if r.Reason != nil && !slices.Contains(Reasons, *r.Reason) {
		errs = append(errs, operation.FieldError{Field: "reason", Message: "must be one of " + strings.Join(Reasons, ", ")})
	}
	return operation.Invalid(errs)
}

// amountOf decides how much nr refunds of payment p, of which refunds
// already hold held, or the refusal that is its final answer: a payment that
// did not succeed, or a refund larger than what is left.
func amountOf(p payments.Payment, held int64, nr NewRefund) (int64, error) {
	if p.Status != operation.StatusSucceeded {
		return 0, fmt.Errorf("%w; payment %s is %s", ErrNotRefundable, p.ID, p.Status)
	}
	left := p.Amount - held
	amount := left
	if nr.Amount != nil {
		amount = *nr.Amount
	}
	if left == 0 || amount > left {
		return 0, fmt.Errorf("%w: %d %s left to refund on payment %s", ErrExceedsPayment, left, p.Currency, p.ID)
	}
	return amount, nil
}
