package refunds

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Processor is the processor as the refund sees it: a refund made at most
// once per downstream key, a lookup by key, a fence, and a ledger. The
// processor's adapter (package gateway) implements it.
type Processor interface {
	// Refund refunds part of a charge, or returns the refund already made
	// under req.IdempotencyKey, with the error rules of
	// payments.Processor.Charge.
	Refund(ctx context.Context, req Request) (operation.Outcome, error)
	// FindRefund, CloseRefund and LedgerRefunds are Kind.Find, Kind.Close
	// and Kind.Ledger for refunds; a ledger entry's Reference is the
	// refund's id, its Currency empty.
	FindRefund(ctx context.Context, key string) (operation.Outcome, bool, error)
	CloseRefund(ctx context.Context, key string) (operation.Outcome, bool, error)
	LedgerRefunds(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error)
}

// Request is what the refund phase sends to the processor.
type Request struct {
	// IdempotencyKey is the downstream key, derived from the refund's id.
	IdempotencyKey string
	ChargeID       string
	Amount         int64
}

// Kind declares the refund to the machinery (operation.Kind), its refunds
// made by Processor. The API, which makes no processor call, declares it
// with none.
type Kind struct{ Processor Processor }

var _ operation.Kind = Kind{}

// Names implements operation.Kind.
func (Kind) Names() operation.Names { return Names }

// Object implements operation.Kind.
func (Kind) Object() any { return Refund{} }

// Request implements operation.Kind.
func (Kind) Request() any { return NewRefund{} }

// Errors implements operation.Kind.
func (Kind) Errors() []operation.ErrorRule { return rules }

// loadRefund reads a refund, the charge it refunds, its payment's currency,
// whether its deadline has passed (by the database's clock) and its key's
// recovery point.
const loadRefund = `
SELECT ` + columns + `, p.processor_charge_id, p.currency, now() >= r.created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = r.idempotency_key_id)
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	var (
		chargeID *string
		currency string
		past     bool
		point    *string
	)
	ref, err := scan(db.QueryRow(ctx, loadRefund, id, deadline), &chargeID, &currency, &past, &point)
	if err != nil {
		return operation.Pending{}, err
	}
	req := Request{IdempotencyKey: Names.DownstreamKey(ref.ID), Amount: ref.Amount}
	return operation.Pending{TenantID: ref.TenantID, KeyID: ref.KeyID, RecoveryPoint: point, PastDeadline: past,
		Amount: ref.Amount, Currency: currency, Recorded: operation.Recorded(ref.Status, ref.ProcessorRefundID, ref.FailureCode),
		Make: func(ctx context.Context) (operation.Outcome, error) {
			if chargeID == nil {
				// Refunds are taken only of succeeded payments, which have one.
				return operation.Outcome{}, fmt.Errorf("payment %s has no processor charge to refund", ref.PaymentID)
			}
			req.ChargeID = *chargeID
			return k.Processor.Refund(ctx, req)
		}}, nil
}

// recordRefund writes the outcome on the refund and counts a success on its
// payment, in one statement, and returns how many refunds it wrote.
const recordRefund = `
WITH r AS (
	UPDATE refunds SET status = $2, processor_refund_id = $3, failure_code = $4, settled_by = $5, updated_at = now()
	WHERE id = $1
	RETURNING payment_id, amount),
counted AS (
	UPDATE payments p SET amount_refunded = p.amount_refunded + r.amount, updated_at = now()
	FROM r WHERE p.id = r.payment_id AND $2 = 'succeeded')
SELECT count(*) FROM r`

// Record implements operation.Kind: the outcome on the refund, and a
// success counted on the payment, in the same transaction.
func (Kind) Record(b *pgx.Batch, id, status string, out operation.Outcome, path string) {
	b.Queue(recordRefund, id, status, operation.Nullable(out.ID), operation.Nullable(out.FailureCode), path).
		QueryRow(func(row pgx.Row) error {
			var n int64
			if err := row.Scan(&n); err != nil {
				return err
			}
			return operation.Wrote(Names.Type, id, n)
		})
}

const getRefundByID = `SELECT ` + columns + ` FROM refunds r WHERE r.id = $1`

// Final implements operation.Kind: 201 with the refund when it succeeded,
// else a 402 problem (502 when the service gave up on it) carrying it.
func (Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	ref, err := scan(tx.QueryRow(ctx, getRefundByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	resp := render.Final(Names, ref.ID, ref, ref.Status, ref.FailureCode,
		render.Declined{Title: "Refund failed", Detail: "The processor refused the refund."})
	return operation.Final{TenantID: ref.TenantID, Status: ref.Status, Object: ref, Response: resp}, nil
}

// Find implements operation.Kind.
func (k Kind) Find(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.Processor.FindRefund(ctx, key)
}

// Close implements operation.Kind.
func (k Kind) Close(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.Processor.CloseRefund(ctx, key)
}

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return k.Processor.LedgerRefunds(ctx, since, cursor)
}

// accountedRefunds reads refunds with their payment's currency.
const accountedRefunds = `
SELECT r.id, r.status, r.processor_refund_id, r.amount, p.currency
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = ANY($1)`

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	rows, err := db.Query(ctx, accountedRefunds, ids)
	if err != nil {
		return nil, fmt.Errorf("look up refunds: %w", err)
	}
	return operation.CollectAccounted(rows)
}
