package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// Kind declares the payment to the machinery (operation.Kind), its charges
// made by Processor. The API, which makes no processor call, declares it
// with none.
type Kind struct{ Processor Processor }

var _ operation.Kind = Kind{}

// Names implements operation.Kind.
func (Kind) Names() operation.Names { return Names }

// Object implements operation.Kind.
func (Kind) Object() any { return Payment{} }

// Request implements operation.Kind.
func (Kind) Request() any { return NewPayment{} }

// Errors implements operation.Kind: a payment's first phase refuses nothing
// but an invalid request.
func (Kind) Errors() []operation.ErrorRule { return nil }

// loadPayment reads a payment, whether its deadline has passed (by the
// database's clock) and its key's recovery point.
const loadPayment = `
SELECT ` + columns + `, now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = payments.idempotency_key_id)
FROM payments WHERE id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	var (
		past  bool
		point *string
	)
	p, err := scan(db.QueryRow(ctx, loadPayment, id, deadline), &past, &point)
	if err != nil {
		return operation.Pending{}, err
	}
	req := ChargeRequest{IdempotencyKey: Names.DownstreamKey(p.ID), PaymentID: p.ID, Amount: p.Amount,
		Currency: p.Currency, PaymentMethod: p.PaymentMethod}
	if p.Description != nil {
		req.Description = *p.Description
	}
	return operation.Pending{TenantID: p.TenantID, KeyID: p.KeyID, RecoveryPoint: point, PastDeadline: past,
		Amount: p.Amount, Currency: p.Currency, Recorded: operation.Recorded(p.Status, p.ProcessorChargeID, p.FailureCode),
		Make: func(ctx context.Context) (operation.Outcome, error) { return k.Processor.Charge(ctx, req) }}, nil
}

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, settled_by = $6, updated_at = now()
WHERE id = $1`

// Record implements operation.Kind.
func (Kind) Record(b *pgx.Batch, id, status string, out operation.Outcome, path string) {
	b.Queue(recordCharge, id, status, operation.Nullable(out.ID), operation.Nullable(out.FailureCode),
		operation.Nullable(out.FailureMessage), path).Exec(func(tag pgconn.CommandTag) error {
		return operation.Wrote(Names.Type, id, tag.RowsAffected())
	})
}

const getPaymentByID = `SELECT ` + columns + ` FROM payments WHERE id = $1`

// Final implements operation.Kind: 201 with the payment when it succeeded,
// else a 402 problem (502 when the service gave up on it) carrying it.
func (Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	p, err := scan(tx.QueryRow(ctx, getPaymentByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	message := "The payment failed."
	if p.FailureMessage != nil {
		message = *p.FailureMessage
	}
	resp := render.Final(Names, p.ID, p, p.Status, p.FailureCode, render.Declined{Title: "Payment declined", Detail: message})
	return operation.Final{TenantID: p.TenantID, Status: p.Status, Object: p, Response: resp}, nil
}

// Find implements operation.Kind.
func (k Kind) Find(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.Processor.FindCharge(ctx, key)
}

// Close implements operation.Kind.
func (k Kind) Close(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.Processor.CloseCharge(ctx, key)
}

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return k.Processor.LedgerCharges(ctx, since, cursor)
}

const accountedPayments = `SELECT id, status, processor_charge_id, amount, currency FROM payments WHERE id = ANY($1)`

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	rows, err := db.Query(ctx, accountedPayments, ids)
	if err != nil {
		return nil, fmt.Errorf("look up payments: %w", err)
	}
	return operation.CollectAccounted(rows)
}
