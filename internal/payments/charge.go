package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// Crash points of the worker, for the crash tests (see Charger.Crash).
const (
	// CrashAfterProcessorResponse is reached when the processor has answered
	// and the charge_created phase has not committed.
	CrashAfterProcessorResponse = "after_processor_response"
	// CrashAfterChargeCreated is reached after charge_created commits and
	// before the finished phase starts.
	CrashAfterChargeCreated = "after_charge_created"
)

// Charger drives a payment from started to finished, one atomic phase at a
// time, so that a crash anywhere resumes from the recovery point.
type Charger struct {
	DB        database.DBTX
	Keys      *idempotency.Store
	Processor Processor
	// Render turns a payment in its final state into the response stored on
	// its key and replayed to every retry.
	Render Renderer
	Now    func() time.Time
	// ChargeDeadline is how long after its creation a payment may still be
	// charged. Past it, a charge the processor confirms absent is given up
	// and the payment fails with processor_error.
	ChargeDeadline time.Duration
	// Crash, when set, is called at each crash point; the crash tests make it
	// kill the process. It is nil in production.
	Crash func(point string)
}

// CompleteFunc completes the job that drives the payment, inside the
// transaction of the final phase, so the job ends exactly when the key does.
type CompleteFunc func(ctx context.Context, tx pgx.Tx) error

// Process runs every phase the payment's key has not passed yet, charging
// the payment if no outcome is recorded.
func (c *Charger) Process(ctx context.Context, paymentID string, complete CompleteFunc) error {
	return c.drive(ctx, paymentID, c.createCharge(paymentID), complete)
}

// Reconcile settles a payment whose charge outcome is unknown. It asks the
// processor for the charge by downstream key: found, it is recorded; confirmed
// absent, the payment is charged again with the same key, which is safe as
// absent means never executed; absent past the charge deadline, the payment
// fails with processor_error. Then the remaining phases run.
func (c *Charger) Reconcile(ctx context.Context, paymentID string) error {
	return c.drive(ctx, paymentID, c.reconcileCharge(paymentID), nil)
}

// CreateCharge runs only the charge_created phase, if the key is still at
// started. Process runs it too; tests use it to stop a payment in between.
func (c *Charger) CreateCharge(ctx context.Context, paymentID string) error {
	key, err := c.key(ctx, paymentID)
	if err != nil || key.Finished() {
		return err
	}
	_, err = c.Keys.RunPhase(ctx, key.ID, idempotency.RecoveryStarted, c.createCharge(paymentID))
	return err
}

const getPaymentByID = `SELECT ` + paymentColumns + ` FROM payments WHERE id = $1`

// key returns the idempotency key that drives the payment. A payment whose
// key was reaped is finished (only finished keys are reaped).
func (c *Charger) key(ctx context.Context, paymentID string) (idempotency.Key, error) {
	p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, paymentID))
	if err != nil {
		return idempotency.Key{}, fmt.Errorf("load payment %s: %w", paymentID, err)
	}
	if p.KeyID == nil {
		return idempotency.Key{RecoveryPoint: idempotency.RecoveryFinished}, nil
	}
	return c.Keys.GetByID(ctx, c.DB, *p.KeyID)
}

// drive runs the phases from wherever the key stands, with charge as the
// phase that learns the charge's outcome.
func (c *Charger) drive(ctx context.Context, paymentID string, charge idempotency.Phase, complete CompleteFunc) error {
	key, err := c.key(ctx, paymentID)
	if err != nil || key.Finished() {
		return err
	}
	return c.Keys.Drive(ctx, key.ID, idempotency.Phases{
		idempotency.RecoveryStarted: charge,
		RecoveryChargeCreated:       c.finish(paymentID, complete),
	})
}

func (c *Charger) crash(point string) {
	if c.Crash != nil {
		c.Crash(point)
	}
}

// DownstreamKey is the processor idempotency key of a payment's charge: stable
// for the payment and unique across tenants, since payment ids are.
func DownstreamKey(paymentID string) string { return "charge_" + paymentID }

// createCharge is the phase whose one foreign side effect is the processor
// call. A definite answer (success or decline) is recorded on the payment in
// the transaction that moves the key to charge_created; an unknown outcome is
// returned as an error, to be retried with the same downstream key.
func (c *Charger) createCharge(paymentID string) idempotency.Phase {
	var charge Charge
	return idempotency.Phase{
		Call: func(ctx context.Context, _ idempotency.Key) error {
			p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, paymentID))
			if err != nil {
				return err
			}
			charge, err = c.charge(ctx, p)
			return err
		},
		Commit: func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
			return c.record(ctx, tx, paymentID, charge)
		},
	}
}

// reconcileCharge is createCharge for a payment whose earlier calls had no
// known outcome: it looks the charge up before deciding to charge again.
func (c *Charger) reconcileCharge(paymentID string) idempotency.Phase {
	var charge Charge
	return idempotency.Phase{
		Call: func(ctx context.Context, _ idempotency.Key) error {
			p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, paymentID))
			if err != nil {
				return err
			}
			var found bool
			charge, found, err = c.Processor.FindCharge(ctx, DownstreamKey(p.ID))
			switch {
			case err != nil:
				return fmt.Errorf("find charge of %s: %w", p.ID, err)
			case found:
			case c.Now().Before(p.CreatedAt.Add(c.ChargeDeadline)):
				charge, err = c.charge(ctx, p)
			default:
				charge = Charge{FailureCode: FailureProcessorError,
					FailureMessage: "The processor could not confirm the charge before the deadline. Nothing was charged."}
			}
			return err
		},
		Commit: func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
			return c.record(ctx, tx, paymentID, charge)
		},
	}
}

// charge calls the processor with the payment's downstream key.
func (c *Charger) charge(ctx context.Context, p Payment) (Charge, error) {
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
		return Charge{}, fmt.Errorf("charge payment %s: %w", p.ID, err)
	}
	c.crash(CrashAfterProcessorResponse)
	return charge, nil
}

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, updated_at = $6
WHERE id = $1`

// record writes a definite outcome on the payment and moves its key on.
func (c *Charger) record(ctx context.Context, tx pgx.Tx, paymentID string, charge Charge) (idempotency.Next, error) {
	status := StatusSucceeded
	if !charge.Succeeded {
		status = StatusFailed
	}
	now := c.Now().UTC().Truncate(time.Microsecond)
	_, err := tx.Exec(ctx, recordCharge, paymentID, status, nullable(charge.ID),
		nullable(charge.FailureCode), nullable(charge.FailureMessage), now)
	if err != nil {
		return idempotency.Next{}, fmt.Errorf("record charge: %w", err)
	}
	return idempotency.AdvanceTo(RecoveryChargeCreated), nil
}

const settled = `UPDATE payments SET reconcile_since = NULL WHERE id = $1`

// finish is the phase that stores the final response, stages the immutable
// event that follows it and completes the job; it calls nothing outside.
func (c *Charger) finish(paymentID string, complete CompleteFunc) idempotency.Phase {
	return idempotency.Phase{Commit: func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
		// The key is at charge_created: the last phase has committed.
		c.crash(CrashAfterChargeCreated)
		p, err := scanPayment(tx.QueryRow(ctx, getPaymentByID, paymentID))
		if err != nil {
			return idempotency.Next{}, err
		}
		if p.Status == StatusProcessing {
			return idempotency.Next{}, errors.New("payment has no outcome to finish with")
		}
		if err := stageEvent(ctx, tx, c.Now(), p.TenantID, "payment."+p.Status, p.ID, p); err != nil {
			return idempotency.Next{}, err
		}
		if _, err := tx.Exec(ctx, settled, p.ID); err != nil {
			return idempotency.Next{}, fmt.Errorf("clear reconciliation mark: %w", err)
		}
		if complete != nil {
			if err := complete(ctx, tx); err != nil {
				return idempotency.Next{}, fmt.Errorf("complete job: %w", err)
			}
		}
		return idempotency.Finish(c.Render.Payment(p)), nil
	}}
}

const markForReconciliation = `
UPDATE payments SET reconcile_since = coalesce(reconcile_since, $2) WHERE id = $1`

// MarkForReconciliation hands a payment whose outcome the worker could not
// learn to the reconciler. The payment is never dropped.
func (c *Charger) MarkForReconciliation(ctx context.Context, paymentID string) error {
	if _, err := c.DB.Exec(ctx, markForReconciliation, paymentID, c.Now().UTC()); err != nil {
		return fmt.Errorf("mark %s for reconciliation: %w", paymentID, err)
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
