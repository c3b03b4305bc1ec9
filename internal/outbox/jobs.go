package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// ChargeArgs is the job that drives a payment through its phases.
type ChargeArgs struct {
	PaymentID string `json:"payment_id"`
}

// Kind names the job in River's tables.
func (ChargeArgs) Kind() string { return "charge_payment" }

// InsertOpts lets River retry a charge as long as the worker wants: the
// worker's own budget (ChargeWorker.MaxAttempts) decides when to hand the
// payment to the reconciler, so River must never discard it first.
func (ChargeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1000} }

// ChargeWorker runs charge jobs.
type ChargeWorker struct {
	river.WorkerDefaults[ChargeArgs]
	Charger *payments.Charger
	// MaxAttempts is the retry budget. It is the worker's decision, not the
	// inserter's, so it is read here rather than from the job row.
	MaxAttempts int
}

// Work runs the payment's remaining phases; the last one completes the job in
// its own transaction. An error leaves the job to River's retries, which
// resume from the recovery point the key reached, with the same downstream
// key. When the retry budget is spent the payment is handed to the
// reconciler and the job is cancelled: the payment is never dropped.
func (w *ChargeWorker) Work(ctx context.Context, job *river.Job[ChargeArgs]) error {
	err := w.Charger.Process(ctx, job.Args.PaymentID, completeInTx(job))
	if err == nil || job.Attempt < w.MaxAttempts {
		return err
	}
	// The job's context may be the reason it failed; marking must not be.
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if markErr := w.Charger.MarkForReconciliation(markCtx, job.Args.PaymentID); markErr != nil {
		return fmt.Errorf("%w; and marking for reconciliation failed: %w", err, markErr)
	}
	return river.JobCancel(fmt.Errorf("retry budget spent, handed to the reconciler: %w", err))
}

// RefundArgs is the job that drives a refund through its phases.
type RefundArgs struct {
	RefundID string `json:"refund_id"`
}

// Kind names the job in River's tables.
func (RefundArgs) Kind() string { return "refund_payment" }

// InsertOpts keeps a refund retrying, with the same downstream key, for as
// long as its outcome is unknown (about 16 hours at the largest delay).
func (RefundArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1000} }

// RefundWorker runs refund jobs.
type RefundWorker struct {
	river.WorkerDefaults[RefundArgs]
	Refunder *payments.Refunder
}

// Work runs the refund's remaining phases; the last one completes the job.
func (w *RefundWorker) Work(ctx context.Context, job *river.Job[RefundArgs]) error {
	return w.Refunder.Process(ctx, job.Args.RefundID, completeInTx(job))
}

// completeInTx completes job inside the transaction of the phase that
// finishes its operation, so that the job ends exactly when the key does.
func completeInTx[T river.JobArgs](job *river.Job[T]) payments.CompleteFunc {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	}
}

// ReconcileArgs is the periodic reconciliation job.
type ReconcileArgs struct{}

// Kind names the job in River's tables.
func (ReconcileArgs) Kind() string { return "reconcile" }

// ReconcileWorker sweeps stuck payments and then runs the reconciler.
type ReconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	Reconciler *payments.Reconciler
	Sweeper    *Sweeper
	Logger     *slog.Logger
}

// Work runs one reconciliation pass.
func (w *ReconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	stuck, err := w.Sweeper.Sweep(ctx)
	if err != nil {
		return err
	}
	report, err := w.Reconciler.Run(ctx)
	if stuck+report.Settled+report.Unsettled+report.Repaired+report.Discrepancies > 0 {
		w.Logger.Info("reconciled", "stuck", stuck, "settled", report.Settled, "unsettled", report.Unsettled,
			"repaired", report.Repaired, "discrepancies", report.Discrepancies)
	}
	return err
}

// ReapArgs is the periodic job that deletes expired idempotency keys.
type ReapArgs struct{}

// Kind names the job in River's tables.
func (ReapArgs) Kind() string { return "reap_idempotency_keys" }

// ReapWorker deletes finished keys past their expiry, in batches.
type ReapWorker struct {
	river.WorkerDefaults[ReapArgs]
	Keys   *idempotency.Store
	Batch  int
	Logger *slog.Logger
}

// Work reaps until no expired key is left.
func (w *ReapWorker) Work(ctx context.Context, _ *river.Job[ReapArgs]) error {
	n, err := w.Keys.Reap(ctx, w.Batch)
	if n > 0 {
		w.Logger.Info("reaped idempotency keys", "deleted", n)
	}
	return err
}
