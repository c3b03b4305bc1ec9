package payments

import (
	"context"
	"errors"
	"time"

	"github.com/example/payments/internal/idempotency"
)

var (
	// ErrProcessorUnknown reports a processor call whose outcome is not known:
	// a timeout, a connection error or a 5xx. The operation may or may not
	// exist, so the call is retried with the same downstream idempotency key,
	// never a new one, or the processor is asked what happened.
	ErrProcessorUnknown = errors.New("processor outcome unknown")
	// ErrKeyClosed reports an operation refused because its downstream key
	// was closed (see Processor.CloseCharge): the service gave up on it, and
	// nothing was or ever will be made with that key.
	ErrKeyClosed = errors.New("processor: downstream key closed")
)

// Processor is the card processor as the operations see it: a charge or a
// refund made at most once per downstream idempotency key, a lookup by key,
// and a fence that closes a key for good.
type Processor interface {
	// Charge creates a charge, or returns the one already created under
	// req.IdempotencyKey. A decline, or any other definite refusal, is an
	// Outcome that did not succeed, not an error; an unknown outcome wraps
	// ErrProcessorUnknown, a closed key is ErrKeyClosed.
	Charge(ctx context.Context, req ChargeRequest) (Outcome, error)
	// Refund refunds part of a charge, or returns the refund already made
	// under req.IdempotencyKey, with the same error rules as Charge.
	Refund(ctx context.Context, req RefundRequest) (Outcome, error)

	// FindCharge returns the charge made under key. found is false only
	// when the processor confirms that no charge was made under it (yet:
	// one may still be in flight, which only CloseCharge can rule out).
	FindCharge(ctx context.Context, key string) (charge Outcome, found bool, err error)
	// FindRefund is FindCharge for refunds.
	FindRefund(ctx context.Context, key string) (refund Outcome, found bool, err error)

	// CloseCharge closes key for charges for good: once it returns, no charge
	// can ever be made with key. If a charge was made under key first, or is
	// being made right now (the close waits for it), it is returned with made
	// set; otherwise made is false and nothing was or ever will be charged.
	CloseCharge(ctx context.Context, key string) (charge Outcome, made bool, err error)
	// CloseRefund is CloseCharge for refunds.
	CloseRefund(ctx context.Context, key string) (refund Outcome, made bool, err error)

	// LedgerCharges lists one page of the processor's charges created after
	// since, oldest first, starting after cursor ("" for the first page).
	// next is the cursor of the following page, "" after the last one.
	LedgerCharges(ctx context.Context, since time.Time, cursor string) (page []LedgerEntry, next string, err error)
	// LedgerRefunds is LedgerCharges for refunds.
	LedgerRefunds(ctx context.Context, since time.Time, cursor string) (page []LedgerEntry, next string, err error)
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

// RefundRequest is what the refund phase sends to the processor.
type RefundRequest struct {
	// IdempotencyKey is the downstream key, derived from the refund's id.
	IdempotencyKey string
	ChargeID       string
	Amount         int64
}

// Outcome is a definite answer about one processor operation, a charge or a
// refund: made and succeeded, made and declined, or refused without being
// made (ID empty).
type Outcome struct {
	// ID is the processor's charge or refund id; empty when nothing was made.
	ID             string
	Succeeded      bool
	FailureCode    string
	FailureMessage string
}

// LedgerEntry is a charge or a refund as the processor's ledger holds it.
type LedgerEntry struct {
	ID             string
	IdempotencyKey string
	// PaymentID is the payment a charge references; empty for refunds.
	PaymentID string
	Succeeded bool
	Amount    int64
	// Currency is the currency of a charge; empty for refunds, which the
	// processor answers without one, so that only their amount is compared.
	Currency  string
	CreatedAt time.Time
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
