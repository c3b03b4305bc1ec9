package payments

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Processor is the processor as the payment sees it: a charge made at most
// once per downstream key, a lookup by key, a fence, and a ledger. The
// processor's adapter (package gateway) implements it.
type Processor interface {
	// Charge creates a charge, or returns the one already created under
	// req.IdempotencyKey. A decline, or any other definite refusal, is an
	// Outcome that did not succeed, not an error; an unknown outcome wraps
	// operation.ErrProcessorUnknown, a closed key operation.ErrKeyClosed.
	Charge(ctx context.Context, req ChargeRequest) (operation.Outcome, error)
	// FindCharge, CloseCharge and LedgerCharges are Kind.Find, Kind.Close
	// and Kind.Ledger for charges; a ledger entry's Reference is the
	// payment's id.
	FindCharge(ctx context.Context, key string) (operation.Outcome, bool, error)
	CloseCharge(ctx context.Context, key string) (operation.Outcome, bool, error)
	LedgerCharges(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error)
}

// ChargeRequest is what the charge phase sends to the processor.
type ChargeRequest struct {
	// IdempotencyKey is the downstream key: stable for this payment and
	// unique across tenants, derived from the payment, never the client's.
	IdempotencyKey string
	PaymentID      string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    string
}

// Kind declares the payment to the machinery (operation.Kind); New makes it.
type Kind struct {
	operation.Declared
	processor Processor
}

// New declares the payment, its charges made by p. Its first phase refuses
// nothing but an invalid request. The API, which makes no processor call,
// passes nil.
func New(p Processor) Kind {
	return Kind{Declared: operation.Declare(Names, Payment{}, NewPayment{}), processor: p}
}

// loadPayment reads what the charge phase needs of a payment, in the order
// operation.ScanPending reads, then its charge's payment method and
// description.
const loadPayment = `
SELECT tenant_id, idempotency_key_id, amount, currency, status, processor_charge_id, failure_code,
	now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = payments.idempotency_key_id),
	payment_method, coalesce(description, '')
FROM payments WHERE id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	req := ChargeRequest{IdempotencyKey: Names.DownstreamKey(id), PaymentID: id}
	p, err := operation.ScanPending(db.QueryRow(ctx, loadPayment, id, deadline), Names.Type, &req.PaymentMethod, &req.Description)
	if err != nil {
		return operation.Pending{}, err
	}
	req.Amount, req.Currency = p.Amount, p.Currency
	p.Make = func(ctx context.Context) (operation.Outcome, error) { return k.processor.Charge(ctx, req) }
	return p, nil
}

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, settled_by = $6, updated_at = now()
WHERE id = $1`

// Record implements operation.Kind.
func (Kind) Record(b *pgx.Batch, id, status string, out operation.Outcome, path string) {
	operation.QueueRecord(b, Names.Type, recordCharge, id, status, operation.Nullable(out.ID),
		operation.Nullable(out.FailureCode), operation.Nullable(out.FailureMessage), path)
}

const getPaymentByID = `SELECT ` + columns + ` FROM payments WHERE id = $1`

// Final implements operation.Kind: the payment in its state, rendered as
// the state says (render.Final).
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	p, err := scan(tx.QueryRow(ctx, getPaymentByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(p.Status)
	if err != nil {
		return operation.Final{}, err
	}
	message := "The payment failed."
	if p.FailureMessage != nil {
		message = *p.FailureMessage
	}
	resp := render.Final(Names, st, p.ID, p, p.FailureCode, render.Declined{Title: "Payment declined", Detail: message})
	return operation.Final{TenantID: p.TenantID, Status: p.Status, Object: p, Response: resp}, nil
}

// Find implements operation.Kind.
func (k Kind) Find(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.processor.FindCharge(ctx, key)
}

// Close implements operation.Kind.
func (k Kind) Close(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.processor.CloseCharge(ctx, key)
}

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return k.processor.LedgerCharges(ctx, since, cursor)
}

const accountedPayments = `SELECT id, status, processor_charge_id, amount, currency FROM payments WHERE id = ANY($1)`

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	return operation.QueryAccounted(ctx, db, accountedPayments, ids)
}
