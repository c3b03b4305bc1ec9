// Package outbox is the transactional outbox on River: jobs are inserted with
// InsertTx in the same transaction as the business rows that need them, and
// River's workers run them against the payments phases.
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/example/payments/internal/payments"
)

// ChargeArgs is the job that drives a payment through its phases.
type ChargeArgs struct {
	PaymentID string `json:"payment_id"`
}

// Kind names the job in River's tables.
func (ChargeArgs) Kind() string { return "charge_payment" }

// Queue inserts jobs in the caller's transaction. It implements payments.JobQueue.
type Queue struct {
	Client *river.Client[pgx.Tx]
}

// EnqueueCharge stages the charge job of a payment inside tx.
func (q Queue) EnqueueCharge(ctx context.Context, tx pgx.Tx, paymentID string) error {
	if _, err := q.Client.InsertTx(ctx, tx, ChargeArgs{PaymentID: paymentID}, nil); err != nil {
		return fmt.Errorf("insert charge job: %w", err)
	}
	return nil
}

// NewInserter returns a River client that only inserts jobs, for the API.
func NewInserter(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
}

// ChargeWorker runs charge jobs.
type ChargeWorker struct {
	river.WorkerDefaults[ChargeArgs]
	Charger *payments.Charger
}

// Work runs the payment's remaining phases; the last one completes the job in
// its own transaction. An error leaves the job to River's retries, which
// resume from the recovery point the key reached.
func (w *ChargeWorker) Work(ctx context.Context, job *river.Job[ChargeArgs]) error {
	return w.Charger.Process(ctx, job.Args.PaymentID, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// WorkerConfig tunes the River client that runs jobs.
type WorkerConfig struct {
	// MaxWorkers is how many jobs run at once.
	MaxWorkers int
	// JobTimeout bounds one attempt of a job.
	JobTimeout time.Duration
	// FetchPollInterval is how often the queue is polled when no notification
	// says that a job is waiting.
	FetchPollInterval time.Duration
}

// NewWorker returns a River client that runs charge jobs with charger.
func NewWorker(pool *pgxpool.Pool, logger *slog.Logger, cfg WorkerConfig, charger *payments.Charger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &ChargeWorker{Charger: charger}); err != nil {
		return nil, err
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers:           workers,
		JobTimeout:        cfg.JobTimeout,
		FetchPollInterval: cfg.FetchPollInterval,
	})
}
