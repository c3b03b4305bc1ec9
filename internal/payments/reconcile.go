package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Kinds of discrepancy between the processor's ledger and the payments.
const (
	// DiscrepancyUnknownCharge is a charge for a payment the service does not have.
	DiscrepancyUnknownCharge = "unknown_charge"
	// DiscrepancyDuplicateCharge is a second charge for a payment already charged.
	DiscrepancyDuplicateCharge = "duplicate_charge"
	// DiscrepancyChargedAfterFailure is a charge for a payment finished as failed
	// without one.
	DiscrepancyChargedAfterFailure = "charged_after_failure"
)

// Reconciler settles what the worker could not know: payments marked for
// reconciliation, and charges in the processor's ledger that the payments do
// not account for.
type Reconciler struct {
	Charger *Charger
	Logger  *slog.Logger
	// Window is how far back the processor's ledger is compared.
	Window time.Duration
	// Grace is how old a charge must be before it is compared, so that
	// charges the worker is recording right now are left to it.
	Grace time.Duration
	// BatchSize bounds how many marked payments one run settles.
	BatchSize int
	// OnDiscrepancy is called for each charge the payments do not account
	// for, with its kind; the worker counts them in a metric.
	OnDiscrepancy func(kind string)
}

// Report says what one run did.
type Report struct {
	Settled       int
	Unsettled     int
	Repaired      int
	Discrepancies int
}

const markedPayments = `
SELECT id FROM payments WHERE reconcile_since IS NOT NULL ORDER BY reconcile_since, id LIMIT $1`

// Run settles a batch of marked payments, then compares the ledger. A
// payment that still cannot be settled stays marked for the next run.
func (r *Reconciler) Run(ctx context.Context) (Report, error) {
	var report Report
	c := r.Charger
	rows, err := c.DB.Query(ctx, markedPayments, r.BatchSize)
	if err != nil {
		return report, fmt.Errorf("list marked payments: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return report, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return report, fmt.Errorf("list marked payments: %w", err)
	}
	for _, id := range ids {
		if err := c.Reconcile(ctx, id); err != nil {
			report.Unsettled++
			r.Logger.Warn("payment not settled yet", "payment_id", id, "err", err)
			continue
		}
		report.Settled++
		r.Logger.Info("payment settled by the reconciler", "payment_id", id)
	}

	repaired, discrepancies, err := r.compareLedger(ctx)
	report.Repaired, report.Discrepancies = repaired, discrepancies
	return report, err
}

// compareLedger walks the processor's recent charges. A charge for a payment
// still processing is a repair: the payment is marked, and the next run
// records the charge. Anything else unaccounted for is reported.
func (r *Reconciler) compareLedger(ctx context.Context) (repaired, discrepancies int, err error) {
	c := r.Charger
	charges, err := c.Processor.RecentCharges(ctx, c.Now().Add(-r.Window))
	if err != nil {
		return 0, 0, fmt.Errorf("list recent charges: %w", err)
	}
	cutoff := c.Now().Add(-r.Grace)
	for _, ch := range charges {
		if ch.CreatedAt.After(cutoff) {
			break // oldest first: the rest are newer still
		}
		p, err := scanPayment(c.DB.QueryRow(ctx, getPaymentByID, ch.PaymentID))
		kind := ""
		switch {
		case errors.Is(err, ErrNotFound):
			kind = DiscrepancyUnknownCharge
		case err != nil:
			return repaired, discrepancies, err
		case p.ProcessorChargeID != nil && *p.ProcessorChargeID == ch.ID:
			continue // accounted for
		case p.ProcessorChargeID != nil:
			kind = DiscrepancyDuplicateCharge
		case p.Status == StatusProcessing:
			if err := c.MarkForReconciliation(ctx, p.ID); err != nil {
				return repaired, discrepancies, err
			}
			repaired++
			continue
		default:
			kind = DiscrepancyChargedAfterFailure
		}
		discrepancies++
		r.Logger.Error("processor charge not accounted for", "kind", kind, "charge_id", ch.ID,
			"payment_id", ch.PaymentID, "idempotency_key", ch.IdempotencyKey, "amount", ch.Amount, "succeeded", ch.Succeeded)
		if r.OnDiscrepancy != nil {
			r.OnDiscrepancy(kind)
		}
	}
	return repaired, discrepancies, nil
}
