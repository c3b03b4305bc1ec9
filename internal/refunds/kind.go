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
// once per downstream key. What else it can do is its declaration's to say
// (operation.Processor), as for payments.Processor: a lookup
// (RefundFinder), a fence (RefundCloser), a ledger (RefundLedger).
type Processor interface {
	// Refund refunds part of a charge, or returns the refund already made
	// under req.IdempotencyKey, with the error rules of
	// payments.Processor.Charge. A processor that settles refunds only
	// later, by its webhook, answers a refund it took with an outcome that
	// waits (operation.Outcome.Waiting): the refund is then pending.
	Refund(ctx context.Context, req Request) (operation.Outcome, error)
}

// RefundFinder is a processor's lookup of a refund, given what it sent.
type RefundFinder interface {
	FindRefund(ctx context.Context, req Request) (operation.Outcome, bool, error)
}

// RefundCloser is a processor's fence on a refund's key, given what it sent.
type RefundCloser interface {
	CloseRefund(ctx context.Context, req Request) (operation.Outcome, bool, error)
}

// RefundLedger is a processor's ledger of refunds; an entry's Reference is
// the refund's id, its Currency empty where the processor names none.
type RefundLedger interface {
	LedgerRefunds(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error)
}

// Request is what the refund phase sends to the processor, and what its
// lookup and its fence are given.
type Request struct {
	// IdempotencyKey is the downstream key, derived from the refund's id.
	IdempotencyKey string
	// ChargeID is the processor's id of the payment's charge.
	ChargeID string
	Amount   int64
	// Currency is the payment's.
	Currency string
	// CreatedAt is when the refund was created, by the database clock.
	CreatedAt time.Time
}

// Kind declares the refund to the machinery (operation.Kind); New makes it.
type Kind struct {
	operation.Declared
	processor Processor
	// What p has of a lookup, a fence and a ledger: nil where it has none.
	finder RefundFinder
	closer RefundCloser
	ledger RefundLedger
}

// New declares the refund, its refunds made by p and its first phase's
// refusals answered as rules says. The API, which makes no processor call,
// passes nil.
func New(p Processor) Kind {
	k := Kind{Declared: operation.Declare(Names, Refund{}, NewRefund{}, rules...).WithStates(States...), processor: p}
	k.finder, _ = p.(RefundFinder)
	k.closer, _ = p.(RefundCloser)
	k.ledger, _ = p.(RefundLedger)
	return k
}

// StatusPending is the status of a refund the processor took and settles
// later, by its webhook (operation.Processor.ByWebhook).
const StatusPending = "pending"

// States are the refund's: succeeded, which also stages payment.refunded
// about the payment it refunded, with the amount refunded counted, and
// which the processor's later word that the refund failed moves on to
// failed (the amount then free to refund again); failed;
// and pending, a refund the processor took and settles later by its
// webhook (answered 202), which holds its amount against the payment's
// until then.
var States = []operation.State{
	{Status: operation.StatusSucceeded, Succeeded: true, Reversible: true, Answer: http.StatusCreated, Event: "refund.succeeded", Parent: "payment.refunded"},
	{Status: operation.StatusFailed, Answer: http.StatusPaymentRequired, Event: "refund.failed"},
	{Status: StatusPending, Succeeded: true, Waiting: true, Answer: http.StatusAccepted, Event: "refund.pending"},
}

// loadRefund reads what the refund phase needs of a refund, in the order
// operation.ScanPending reads (the currency is its payment's), then its
// payment and the charge it refunds.
const loadRefund = `
SELECT r.tenant_id, r.idempotency_key_id, r.amount, p.currency, r.status, r.processor_refund_id, r.failure_code,
	r.created_at, now() >= r.created_at + $2::interval,
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
	req := Request{IdempotencyKey: Names.DownstreamKey(id), Amount: p.Amount, Currency: p.Currency, CreatedAt: p.CreatedAt}
	if chargeID != nil {
		req.ChargeID = *chargeID
	}
	p.Make = func(ctx context.Context) (operation.Outcome, error) {
		if chargeID == nil {
			// Refunds are taken only of succeeded payments, which have one.
			return operation.Outcome{}, fmt.Errorf("payment %s has no processor charge to refund", paymentID)
		}
		return k.processor.Refund(ctx, req)
	}
	if k.finder != nil {
		p.Find = func(ctx context.Context) (operation.Outcome, bool, error) { return k.finder.FindRefund(ctx, req) }
	}
	if k.closer != nil {
		p.Close = func(ctx context.Context) (operation.Outcome, bool, error) { return k.closer.CloseRefund(ctx, req) }
	}
	return p, nil
}

// recordRefund writes the outcome on the refund and counts it on its
// payment, in one statement, and returns how many refunds it wrote: a
// success adds its amount to what the payment has refunded, and a failure
// after a success (the processor's later word) takes it back.
const recordRefund = `
WITH r AS (
	UPDATE refunds r SET status = $2, processor_refund_id = $3, failure_code = $4, settled_by = $5, updated_at = now()
	FROM (SELECT id, status FROM refunds WHERE id = $1) was
	WHERE r.id = $1 AND was.id = r.id
	RETURNING r.payment_id, r.amount, was.status AS was),
counted AS (
	UPDATE payments p SET amount_refunded = p.amount_refunded + CASE WHEN $2 = 'succeeded' THEN r.amount ELSE -r.amount END,
		updated_at = now()
	FROM r WHERE p.id = r.payment_id AND ($2 = 'succeeded') <> (r.was = 'succeeded'))
SELECT count(*) FROM r`

// Record implements operation.Kind: the outcome on the refund, and its
// amount counted on the payment, in the same transaction.
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
// the state says (render.FinalResponse).
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	ref, err := scan(tx.QueryRow(ctx, getRefundByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(ref.Status)
	if err != nil {
		return operation.Final{}, err
	}
	resp := render.FinalResponse(Names, st, ref.ID, ref, ref.FailureCode,
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

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	if k.ledger == nil {
		return nil, "", operation.ErrNoLedger
	}
	return k.ledger.LedgerRefunds(ctx, since, cursor)
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
