package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// Charge drives payment paymentID from wherever its key stands to finished,
// as its job's attempt-th attempt; complete ends the job with the key. See
// Operations for the phases and what happens when the budget is spent.
func (o *Operations) Charge(ctx context.Context, paymentID string, attempt int, complete CompleteFunc) error {
	return o.run(ctx, chargeOp{o}, paymentID, attempt, complete)
}

// DownstreamKey is the processor idempotency key of a payment's charge: stable
// for the payment and unique across tenants, since payment ids are.
func DownstreamKey(paymentID string) string { return "charge_" + paymentID }

// chargeOp is the charge of a payment, as the state machine sees it.
type chargeOp struct{ o *Operations }

func (chargeOp) resourceType() string { return PaymentResourceType }
func (chargeOp) createdPoint() string { return RecoveryChargeCreated }

// getPaymentToCharge reads a payment, whether its deadline has passed (by
// the database's clock) and its key's recovery point.
const getPaymentToCharge = `
SELECT ` + paymentColumns + `, now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = payments.idempotency_key_id)
FROM payments WHERE id = $1`

func (c chargeOp) load(ctx context.Context, db database.DBTX, id string) (pending, error) {
	var (
		past  bool
		point *string
	)
	p, err := scanPayment(db.QueryRow(ctx, getPaymentToCharge, id, c.o.Deadline), &past, &point)
	if err != nil {
		return pending{}, err
	}
	desc := ""
	if p.Description != nil {
		desc = *p.Description
	}
	req := ChargeRequest{IdempotencyKey: DownstreamKey(p.ID), PaymentID: p.ID, Amount: p.Amount,
		Currency: p.Currency, PaymentMethod: p.PaymentMethod, Description: desc}
	return pending{keyID: p.KeyID, recoveryPoint: point, downstreamKey: req.IdempotencyKey, pastDeadline: past,
		amount: p.Amount, currency: p.Currency, recorded: recordedOutcome(p.Status, p.ProcessorChargeID, p.FailureCode),
		attempt: func(ctx context.Context) (Outcome, error) {
			out, err := c.o.Processor.Charge(ctx, req)
			if err != nil {
				return Outcome{}, fmt.Errorf("charge payment %s: %w", p.ID, err)
			}
			return out, nil
		}}, nil
}

func (c chargeOp) find(ctx context.Context, key string) (Outcome, bool, error) {
	return c.o.Processor.FindCharge(ctx, key)
}

func (c chargeOp) close(ctx context.Context, key string) (Outcome, bool, error) {
	return c.o.Processor.CloseCharge(ctx, key)
}

func (chargeOp) gaveUp() Outcome {
	return Outcome{FailureCode: FailureProcessorError,
		FailureMessage: "The processor could not confirm the charge before the deadline. Nothing was charged, and nothing will be."}
}

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, settled_by = $6, updated_at = now()
WHERE id = $1`

// record writes a definite outcome on the payment.
func (chargeOp) record(ctx context.Context, tx pgx.Tx, id string, out Outcome, path string) error {
	status := StatusSucceeded
	if !out.Succeeded {
		status = StatusFailed
	}
	_, err := tx.Exec(ctx, recordCharge, id, status, nullable(out.ID), nullable(out.FailureCode), nullable(out.FailureMessage), path)
	if err != nil {
		return fmt.Errorf("record charge: %w", err)
	}
	return nil
}

const getPaymentByID = `SELECT ` + paymentColumns + ` FROM payments WHERE id = $1`

func (c chargeOp) finish(ctx context.Context, tx pgx.Tx, id string) (idempotency.Response, error) {
	p, err := scanPayment(tx.QueryRow(ctx, getPaymentByID, id))
	if err != nil {
		return idempotency.Response{}, err
	}
	if p.Status == StatusProcessing {
		return idempotency.Response{}, errors.New("payment has no outcome to finish with")
	}
	if err := c.o.settle(ctx, tx, PaymentResourceType, p.TenantID, "payment."+p.Status, p.ID, p); err != nil {
		return idempotency.Response{}, err
	}
	return c.o.Render.Payment(p), nil
}
