package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// Refund drives refund refundID from wherever its key stands to finished, as
// its job's attempt-th attempt, through the same machine as a charge: retry
// budget, reconciliation and a fenced give-up.
func (o *Operations) Refund(ctx context.Context, refundID string, attempt int, complete CompleteFunc) error {
	return o.run(ctx, refundOp{o}, refundID, attempt, complete)
}

// RefundDownstreamKey is the processor idempotency key of a refund.
func RefundDownstreamKey(refundID string) string { return "refund_" + refundID }

// refundOp is a refund, as the state machine sees it.
type refundOp struct{ o *Operations }

func (refundOp) resourceType() string { return RefundResourceType }
func (refundOp) createdPoint() string { return RecoveryRefundCreated }

// getRefundToMake reads a refund, the charge it refunds, whether its
// deadline has passed (by the database's clock) and its key's recovery point.
const getRefundToMake = `
SELECT ` + refundColumns + `, p.processor_charge_id, p.currency, now() >= r.created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = r.idempotency_key_id)
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = $1`

func (r refundOp) load(ctx context.Context, db database.DBTX, id string) (pending, error) {
	var (
		chargeID *string
		currency string
		past     bool
		point    *string
	)
	ref, err := scanRefund(db.QueryRow(ctx, getRefundToMake, id, r.o.Deadline), &chargeID, &currency, &past, &point)
	if err != nil {
		return pending{}, err
	}
	req := RefundRequest{IdempotencyKey: RefundDownstreamKey(ref.ID), Amount: ref.Amount}
	return pending{keyID: ref.KeyID, recoveryPoint: point, downstreamKey: req.IdempotencyKey, pastDeadline: past,
		amount: ref.Amount, currency: currency, recorded: recordedOutcome(ref.Status, ref.ProcessorRefundID, ref.FailureCode),
		attempt: func(ctx context.Context) (Outcome, error) {
			if chargeID == nil {
				// Refunds are taken only of succeeded payments, which have one.
				return Outcome{}, fmt.Errorf("payment %s has no processor charge to refund", ref.PaymentID)
			}
			req.ChargeID = *chargeID
			out, err := r.o.Processor.Refund(ctx, req)
			if err != nil {
				return Outcome{}, fmt.Errorf("refund %s: %w", ref.ID, err)
			}
			return out, nil
		}}, nil
}

func (r refundOp) find(ctx context.Context, key string) (Outcome, bool, error) {
	return r.o.Processor.FindRefund(ctx, key)
}

func (r refundOp) close(ctx context.Context, key string) (Outcome, bool, error) {
	return r.o.Processor.CloseRefund(ctx, key)
}

func (refundOp) gaveUp() Outcome {
	return Outcome{FailureCode: FailureProcessorError,
		FailureMessage: "The processor could not confirm the refund before the deadline. Nothing was refunded, and nothing will be."}
}

const recordRefund = `
UPDATE refunds SET status = $2, processor_refund_id = $3, failure_code = $4, settled_by = $5, updated_at = now()
WHERE id = $1
RETURNING payment_id, amount`

const addRefunded = `UPDATE payments SET amount_refunded = amount_refunded + $2, updated_at = now() WHERE id = $1`

// record writes a definite outcome on the refund and counts a success on the
// payment, in the same transaction.
func (refundOp) record(ctx context.Context, tx pgx.Tx, id string, out Outcome, path string) error {
	status := StatusSucceeded
	if !out.Succeeded {
		status = StatusFailed
	}
	var (
		paymentID string
		amount    int64
	)
	err := tx.QueryRow(ctx, recordRefund, id, status, nullable(out.ID), nullable(out.FailureCode), path).Scan(&paymentID, &amount)
	if err != nil {
		return fmt.Errorf("record refund: %w", err)
	}
	if out.Succeeded {
		if _, err := tx.Exec(ctx, addRefunded, paymentID, amount); err != nil {
			return fmt.Errorf("count refund on payment: %w", err)
		}
	}
	return nil
}

const getRefundByID = `SELECT ` + refundColumns + ` FROM refunds r WHERE r.id = $1`

func (r refundOp) finish(ctx context.Context, tx pgx.Tx, id string) (idempotency.Response, error) {
	ref, err := scanRefund(tx.QueryRow(ctx, getRefundByID, id))
	if err != nil {
		return idempotency.Response{}, err
	}
	if ref.Status == StatusProcessing {
		return idempotency.Response{}, errors.New("refund has no outcome to finish with")
	}
	if err := r.o.settle(ctx, tx, RefundResourceType, ref.TenantID, "refund."+ref.Status, ref.ID, ref); err != nil {
		return idempotency.Response{}, err
	}
	return r.o.Render.Refund(ref), nil
}
