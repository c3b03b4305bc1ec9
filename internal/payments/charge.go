package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// Charger drives a payment from started to finished, one atomic phase at a
// time, so that a crash anywhere resumes from the recovery point.
type Charger struct {
	DB        database.DBTX
	Keys      *idempotency.Store
	Processor Processor
	// Render turns a payment in its final state into the response stored on
	// its key and replayed to every retry.
	Render func(Payment) idempotency.Response
	Now    func() time.Time
}

// CompleteFunc completes the job that drives the payment, inside the
// transaction of the final phase, so the job ends exactly when the key does.
type CompleteFunc func(ctx context.Context, tx pgx.Tx) error

const getPaymentByID = `SELECT ` + paymentColumns + ` FROM payments WHERE id = $1`

// Process runs every phase the payment's key has not passed yet.
func (c *Charger) Process(ctx context.Context, paymentID string, complete CompleteFunc) error {
	p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, paymentID))
	if err != nil {
		return fmt.Errorf("load payment %s: %w", paymentID, err)
	}
	if p.KeyID == nil {
		// Keys are reaped only when finished: nothing is left to do.
		return nil
	}
	key, err := c.Keys.GetByID(ctx, c.DB, *p.KeyID)
	if err != nil {
		return err
	}
	for !key.Finished() {
		switch key.RecoveryPoint {
		case idempotency.RecoveryStarted:
			key, err = c.Keys.RunPhase(ctx, key.ID, key.RecoveryPoint, c.createCharge(paymentID))
		case RecoveryChargeCreated:
			key, err = c.Keys.RunPhase(ctx, key.ID, key.RecoveryPoint, c.finish(paymentID, complete))
		default:
			return fmt.Errorf("payment %s: unknown recovery point %q", paymentID, key.RecoveryPoint)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateCharge runs only the charge_created phase, if the key is still at
// started. Process runs it too; tests use it to stop a payment in between.
func (c *Charger) CreateCharge(ctx context.Context, paymentID string) error {
	p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, paymentID))
	if err != nil {
		return fmt.Errorf("load payment %s: %w", paymentID, err)
	}
	if p.KeyID == nil {
		return nil
	}
	_, err = c.Keys.RunPhase(ctx, *p.KeyID, idempotency.RecoveryStarted, c.createCharge(paymentID))
	return err
}

// DownstreamKey is the processor idempotency key of a payment's charge: stable
// for the payment and unique across tenants, since payment ids are.
func DownstreamKey(paymentID string) string { return "charge_" + paymentID }

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, updated_at = $6
WHERE id = $1`

// createCharge is the phase whose one foreign side effect is the processor
// call. A definite answer (success or decline) is recorded on the payment in
// the transaction that moves the key to charge_created; an unknown outcome is
// returned as an error, to be retried with the same downstream key.
func (c *Charger) createCharge(paymentID string) idempotency.Phase {
	return func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
		p, err := scanPayment(tx.QueryRow(ctx, getPaymentByID, paymentID))
		if err != nil {
			return idempotency.Next{}, err
		}
		desc := ""
		if p.Description != nil {
			desc = *p.Description
		}
		charge, err := c.Processor.Charge(ctx, ChargeRequest{
			IdempotencyKey: DownstreamKey(p.ID),
			PaymentID:      p.ID,
			Amount:         p.Amount,
			Currency:       p.Currency,
			PaymentMethod:  p.PaymentMethod,
			Description:    desc,
		})
		if err != nil {
			return idempotency.Next{}, fmt.Errorf("charge payment %s: %w", p.ID, err)
		}
		status, code, message := StatusSucceeded, nullable(charge.FailureCode), nullable(charge.FailureMessage)
		if !charge.Succeeded {
			status = StatusFailed
		}
		now := c.Now().UTC().Truncate(time.Microsecond)
		if _, err := tx.Exec(ctx, recordCharge, p.ID, status, nullable(charge.ID), code, message, now); err != nil {
			return idempotency.Next{}, fmt.Errorf("record charge: %w", err)
		}
		return idempotency.AdvanceTo(RecoveryChargeCreated), nil
	}
}

const insertEvent = `
INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`

// finish is the phase that stores the final response, stages the immutable
// event that follows it and completes the job; it calls nothing outside.
func (c *Charger) finish(paymentID string, complete CompleteFunc) idempotency.Phase {
	return func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
		p, err := scanPayment(tx.QueryRow(ctx, getPaymentByID, paymentID))
		if err != nil {
			return idempotency.Next{}, err
		}
		if p.Status == StatusProcessing {
			return idempotency.Next{}, errors.New("payment has no outcome to finish with")
		}
		data, err := json.Marshal(p)
		if err != nil {
			return idempotency.Next{}, fmt.Errorf("encode event: %w", err)
		}
		now := c.Now().UTC().Truncate(time.Microsecond)
		if _, err := tx.Exec(ctx, insertEvent, newID("evt_"), p.TenantID, "payment."+p.Status, p.ID, data, now); err != nil {
			return idempotency.Next{}, fmt.Errorf("insert event: %w", err)
		}
		if complete != nil {
			if err := complete(ctx, tx); err != nil {
				return idempotency.Next{}, fmt.Errorf("complete job: %w", err)
			}
		}
		return idempotency.Finish(c.Render(p)), nil
	}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
