package payments

import (
	"context"
	"errors"
	"time"

	"github.com/example/payments/internal/idempotency"
)

// ErrProcessorUnknown reports a processor call whose outcome is not known: a
// timeout, a connection error or a 5xx. The charge may or may not exist, so the
// call is retried with the same downstream idempotency key, never a new one.
var ErrProcessorUnknown = errors.New("processor outcome unknown")

// Processor is the card processor as the charge phase sees it.
type Processor interface {
	// Charge creates a charge, or returns the one already created under
	// req.IdempotencyKey. A decline is a definite outcome, not an error.
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	// FindCharge returns the charge made under idempotencyKey. found is
	// false only when the processor confirms no such request was executed.
	FindCharge(ctx context.Context, idempotencyKey string) (charge Charge, found bool, err error)
	// Refund refunds part of a charge, or returns the refund already made
	// under req.IdempotencyKey. A refusal (4xx) is a definite outcome, not
	// an error.
	Refund(ctx context.Context, req RefundRequest) (ProcessorRefund, error)
	// RecentCharges lists a page of the processor's charges made after since,
	// oldest first, for comparing its ledger with the payments.
	RecentCharges(ctx context.Context, since time.Time) ([]LedgerCharge, error)
}

// RefundRequest is what the refund phase sends to the processor.
type RefundRequest struct {
	// IdempotencyKey is the downstream key, derived from the refund's id.
	IdempotencyKey string
	ChargeID       string
	Amount         int64
}

// ProcessorRefund is a definite refund outcome.
type ProcessorRefund struct {
	ID          string
	Succeeded   bool
	FailureCode string
}

// LedgerCharge is a charge as the processor's ledger holds it.
type LedgerCharge struct {
	ID             string
	PaymentID      string
	IdempotencyKey string
	Succeeded      bool
	Amount         int64
	CreatedAt      time.Time
}

// ChargeRequest is what the charge phase sends to the processor.
type ChargeRequest struct {
	// IdempotencyKey is the downstream key: stable for this operation and
	// unique across tenants, derived from the payment, never the client's key.
	IdempotencyKey string
	PaymentID      string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    string
}

// Charge is a definite processor outcome: a successful or a declined charge.
type Charge struct {
	ID             string
	Succeeded      bool
	FailureCode    string
	FailureMessage string
}

// Renderer turns outcomes into the final responses stored on idempotency
// keys and replayed byte for byte. The HTTP adapter implements it, so that
// this package decides what happened and the adapter how it reads.
type Renderer interface {
	// Payment renders a payment that reached its final status.
	Payment(Payment) idempotency.Response
	// Refund renders a refund that reached its final status.
	Refund(Refund) idempotency.Response
	// Error renders a refusal that is final and stored, such as a refund of
	// a payment that cannot be refunded.
	Error(error) idempotency.Response
}
