package refunds

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
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

// Kind declares the refund to the machinery (operation.Kind); New makes it.
type Kind struct {
	operation.Declared
	processor Processor
}

// New declares the refund, its refunds made by p and its first phase's
// refusals answered as rules says. The API, which makes no processor call,
// passes nil.
func New(p Processor) Kind {
	return Kind{Declared: operation.Declare(Names, Refund{}, NewRefund{}, rules...).WithStates(States...), processor: p}
}

// States are the refund's: succeeded, which also stages payment.refunded
// about the payment it refunded, with the amount refunded counted, and
// failed.
var States = []operation.State{
	{Status: operation.StatusSucceeded, Succeeded: true, Answer: http.StatusCreated, Event: "refund.succeeded", Parent: "payment.refunded"},
	{Status: operation.StatusFailed, Answer: http.StatusPaymentRequired, Event: "refund.failed"},
}

// loadRefund reads what the refund phase needs of a refund, in the order
// operation.ScanPending reads (the currency is its payment's), then its
// payment and the charge it refunds.
const loadRefund = `
SELECT r.tenant_id, r.idempotency_key_id, r.amount, p.currency, r.status, r.processor_refund_id, r.failure_code,
	now() >= r.created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = r.idempotency_key_id),
	r.payment_id, p.processor_charge_id
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	var (
		paymentID string
		chargeID  *string
	)
	p, err := operation.ScanPending(db.QueryRow(ctx, loadRefund, id, deadline), Names.Type, &paymentID, &chargeID)
	if err != nil {
		return operation.Pending{}, err
	}
	req := Request{IdempotencyKey: Names.DownstreamKey(id), Amount: p.Amount}
	p.Make = func(ctx context.Context) (operation.Outcome, error) {
		if chargeID == nil {
			// Refunds are taken only of succeeded payments, which have one.
			return operation.Outcome{}, fmt.Errorf("payment %s has no processor charge to refund", paymentID)
		}
		req.ChargeID = *chargeID
		return k.processor.Refund(ctx, req)
	}
	return p, nil
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

// Final implements operation.Kind: the refund in its state, rendered as
// the state says (render.Final).
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	ref, err := scan(tx.QueryRow(ctx, getRefundByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(ref.Status)
	if err != nil {
		return operation.Final{}, err
	}
	resp := render.Final(Names, st, ref.ID, ref, ref.FailureCode,
		render.Declined{Title: "Refund failed", Detail: "The processor refused the refund."})
	final := operation.Final{TenantID: ref.TenantID, Status: ref.Status, Object: ref, Response: resp}
	if st.Parent != "" {
		p, err := payments.Get(ctx, tx, ref.TenantID, ref.PaymentID)
		if err != nil {
			return operation.Final{}, fmt.Errorf("read the payment of refund %s: %w", ref.ID, err)
		}
		final.Parent = &operation.Parent{ID: p.ID, Object: p}
	}
	return final, nil
}

// Find implements operation.Kind.
func (k Kind) Find(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.processor.FindRefund(ctx, key)
}

// Close implements operation.Kind.
func (k Kind) Close(ctx context.Context, key string) (operation.Outcome, bool, error) {
	return k.processor.CloseRefund(ctx, key)
}

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return k.processor.LedgerRefunds(ctx, since, cursor)
}

// accountedRefunds reads refunds with their payment's currency.
const accountedRefunds = `
SELECT r.id, r.status, r.processor_refund_id, r.amount, p.currency
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = ANY($1)`

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	return operation.QueryAccounted(ctx, db, accountedRefunds, ids)
}
