package payments

import (
	"context"
	"errors"
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
