// Package outbox is the River glue of the service, and only that: jobs are
// inserted with InsertTx in the same transaction as the business rows that
// need them (the transactional outbox), and River's workers run them against
// the operations of package payments, which hold every rule about retries,
// reconciliation and giving up. It also schedules the periodic reconciler
// and key reaper, and tells the sweep which operations still have a live job.
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// Queue inserts jobs with the rows that need them, and tells which jobs are
// live. It implements payments.JobQueue and payments.LiveJobs.
type Queue struct {
	// Client inserts refund jobs with River's InsertTx; Waker wakes the
	// workers for charge jobs, which a payment's one statement inserts.
	Client *river.Client[pgx.Tx]
	Waker  *Waker
	// DB and RescueAfter serve Live; an inserting API needs neither.
	DB          *pgxpool.Pool
	RescueAfter time.Duration
}

// chargeJobs writes the row River's own insert writes for ChargeArgs (the
// documented way to insert jobs from outside River's Go client): queued now,
// River's default queue and priority, the charge's attempts. The outbox
// tests check it against a row River inserts.
var chargeJobs = `
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, metadata, tags)
SELECT jsonb_build_object('payment_id', id), '` + ChargeArgs{}.Kind() + `', ` +
	strconv.Itoa(ChargeArgs{}.InsertOpts().MaxAttempts) + `, ` + strconv.Itoa(river.PriorityDefault) +
	`, '` + river.QueueDefault + `', 'available', now(), '{}', '{}'
FROM `

// ChargeJobs implements payments.JobQueue: the charge job of each payment
// id that the relation from yields.
func (q Queue) ChargeJobs(from string) string { return chargeJobs + from }

// Queued implements payments.JobQueue.
func (q Queue) Queued() {
	if q.Waker != nil {
		q.Waker.Queued()
	}
}

// EnqueueRefund stages the refund job of a refund inside tx.
func (q Queue) EnqueueRefund(ctx context.Context, tx pgx.Tx, refundID string) error {
	if _, err := q.Client.InsertTx(ctx, tx, RefundArgs{RefundID: refundID}, nil); err != nil {
		return fmt.Errorf("insert refund job: %w", err)
	}
	return nil
}

// Waker sends River's insert notification for jobs inserted by SQL, once
// they have committed: at most one per Cooldown, so that a burst wakes the
// workers once, and outside the inserting transaction, so that no insert
// waits for the lock Postgres takes on notifying commits. A lost
// notification costs only latency: the workers poll as well.
type Waker struct {
	db       *pgxpool.Pool
	cooldown time.Duration
	logger   *slog.Logger
	poke     chan struct{}
}

// NewWaker returns a waker; Run sends its notifications.
func NewWaker(pool *pgxpool.Pool, cooldown time.Duration, logger *slog.Logger) *Waker {
	return &Waker{db: pool, cooldown: cooldown, logger: logger, poke: make(chan struct{}, 1)}
}

// Queued asks for a notification; it never blocks.
func (w *Waker) Queued() {
	select {
	case w.poke <- struct{}{}:
	default: // one is already due
	}
}

// notifyInsert is River's insert notification for its default queue, on
// the channel its workers listen to: the schema's river_insert.
const notifyInsert = `SELECT pg_notify(coalesce(current_schema() || '.', '') || 'river_insert', '{"queue": "` + river.QueueDefault + `"}')`

// Run sends the notifications asked for until ctx ends.
func (w *Waker) Run(ctx context.Context) {
	database.Throttle(ctx, w.poke, w.cooldown, func(ctx context.Context) {
		if _, err := w.db.Exec(ctx, notifyInsert); err != nil && ctx.Err() == nil {
			w.logger.Warn("wake workers: the jobs wait for their poll", "err", err)
		}
	})
}

// liveJobs finds the jobs of kind that will still drive one of the resources
// named by ids: waiting to run, or running for less than the rescue delay
// (a job running longer belongs to a dead worker, and River rescues it).
const liveJobs = `
SELECT DISTINCT args->>$2 FROM river_job
WHERE kind = $1 AND args->>$2 = ANY($3)
	AND (state IN ('available', 'pending', 'scheduled', 'retryable')
		OR (state = 'running' AND attempted_at >= now() - $4::interval))`

// Live implements payments.LiveJobs.
func (q Queue) Live(ctx context.Context, resourceType string, ids []string) (map[string]bool, error) {
	kind, arg := ChargeArgs{}.Kind(), "payment_id"
	if resourceType == payments.RefundResourceType {
		kind, arg = RefundArgs{}.Kind(), "refund_id"
	}
	rows, err := q.DB.Query(ctx, liveJobs, kind, arg, ids, q.RescueAfter)
	if err != nil {
		return nil, fmt.Errorf("live jobs: %w", err)
	}
	live := map[string]bool{}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		live[id] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live jobs: %w", err)
	}
	return live, nil
}

// InsertCooldown is the shortest time between two insert notifications of
// one API. River sends at most one per FetchCooldown, also on a client that
// only inserts: at its default of 100 ms, a job inserted within that window
// of another waits for the worker's poll instead. 5 ms wakes the workers for
// every job but a burst's.
const InsertCooldown = 5 * time.Millisecond

// NewInserter returns a River client that only inserts jobs, for the API.
func NewInserter(pool *pgxpool.Pool, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger, FetchCooldown: InsertCooldown})
}

// WorkerConfig tunes the River client that runs jobs.
type WorkerConfig struct {
	// MaxWorkers is how many jobs run at once.
	MaxWorkers int
	// JobTimeout bounds one attempt of a job.
	JobTimeout time.Duration
	// RescueAfter is how long a job may look running before River takes it
	// for a dead worker's and runs it again; see RescueAfter.
	RescueAfter time.Duration
	// Backoff spaces the attempts.
	Backoff Backoff
	// FetchPollInterval is how often the queue is polled when no notification
	// says that a job is waiting.
	FetchPollInterval time.Duration
	// ReconcileTimeout bounds one reconcile run (sweep and a batch), and so
	// how long a dead worker's run holds up the next; LedgerTimeout bounds one
	// ledger comparison. Zero means JobTimeout.
	ReconcileTimeout, LedgerTimeout time.Duration
	// ReconcileInterval and ReapInterval schedule the periodic jobs; zero
	// leaves a job out.
	ReconcileInterval time.Duration
	ReapInterval      time.Duration
}

// RescueAfter is the rescue delay for a job timeout: a job still running a
// little after its own timeout was cancelled belongs to a dead worker. River's
// default is an hour; a dead worker's payments would wait that long.
func RescueAfter(jobTimeout time.Duration) time.Duration {
	return jobTimeout + max(jobTimeout/2, 5*time.Second)
}

// Deps are what the jobs run against.
type Deps struct {
	Ops        *payments.Operations
	Reconciler *payments.Reconciler
	Sweeper    *payments.Sweeper
	Keys       *idempotency.Store
	// ReapBatch is how many keys one delete statement reaps.
	ReapBatch int
	Logger    *slog.Logger
}

// NewWorker returns a River client that runs the charge jobs and the
// periodic reconciler and reaper.
func NewWorker(pool *pgxpool.Pool, logger *slog.Logger, cfg WorkerConfig, deps Deps) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &ChargeWorker{Ops: deps.Ops}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &RefundWorker{Ops: deps.Ops}); err != nil {
		return nil, err
	}
	var periodic []*river.PeriodicJob
	if deps.Reconciler != nil {
		if err := river.AddWorkerSafely(workers, &ReconcileWorker{Reconciler: deps.Reconciler, Sweeper: deps.Sweeper, Logger: deps.Logger,
			RunTimeout: cfg.ReconcileTimeout}); err != nil {
			return nil, err
		}
		if err := river.AddWorkerSafely(workers, &LedgerWorker{Reconciler: deps.Reconciler, Logger: deps.Logger,
			RunTimeout: cfg.LedgerTimeout}); err != nil {
			return nil, err
		}
	}
	if cfg.ReconcileInterval > 0 {
		for _, args := range []river.JobArgs{ReconcileArgs{}, LedgerArgs{}} {
			periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileInterval),
				func() (river.JobArgs, *river.InsertOpts) { return args, nil },
				&river.PeriodicJobOpts{RunOnStart: true}))
		}
	}
	if deps.Keys != nil {
		if err := river.AddWorkerSafely(workers, &ReapWorker{Keys: deps.Keys, Batch: deps.ReapBatch, Logger: deps.Logger}); err != nil {
			return nil, err
		}
	}
	if cfg.ReapInterval > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.ReapInterval),
			func() (river.JobArgs, *river.InsertOpts) { return ReapArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:       logger,
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers:      workers,
		PeriodicJobs: periodic,
		JobTimeout:   cfg.JobTimeout,
		// A dead worker's running jobs are picked up in seconds or minutes,
		// not River's default hour.
		RescueStuckJobsAfter: cfg.RescueAfter,
		RetryPolicy:          cfg.Backoff,
		FetchPollInterval:    cfg.FetchPollInterval,
		// A payment's request waits for its job: pick jobs up within 10 ms of
		// their insert notification rather than River's default 100 ms.
		FetchCooldown: 10 * time.Millisecond,
	})
}
