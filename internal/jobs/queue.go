// Package jobs is the service's glue to River, the job queue, and only that:
// its job kinds and their workers, which run against the machinery of package
// operation (which holds every rule about retries, reconciliation and giving
// up); the relay's bulk insert of the outbox's staged operations
// (InsertManyTx); the processor events' and the deliveries' jobs, inserted
// with InsertTx in the transaction that needs them; the periodic reconciler,
// ledger comparison and key reaper; and asking River which jobs will still
// run. It uses River through its public Go API only: River's tables and
// notification topics are River's own. It names no kind of operation: one
// job kind drives every declared kind (OperationArgs).
package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/webhooks"
)

// Queue puts jobs in River's queue inside the transaction that needs them,
// and asks River which of them will still run. It implements outbox.Queue,
// operation.JobQueue, operation.LiveJobs and webhooks.Jobs.
type Queue struct {
	Client *river.Client[pgx.Tx]
	// RescueAfter is the workers' RescueAfter: a job running for longer
	// belongs to a dead worker (Live). Zero counts every running job live.
	RescueAfter time.Duration
}

// EnqueueOperations implements outbox.Queue: one insert for them all,
// each job carrying its first phase's trace in its metadata as TraceInsert
// would have.
func (q Queue) EnqueueOperations(ctx context.Context, tx pgx.Tx, staged []outbox.Staged) ([]int64, error) {
	jobs := make([]river.InsertManyParams, len(staged))
	want := make([]OperationArgs, len(staged))
	for i, op := range staged {
		want[i] = OperationArgs{ResourceType: op.ResourceType, ID: op.ID}
		jobs[i] = river.InsertManyParams{Args: want[i]}
		if len(op.Trace) == 0 {
			continue
		}
		if md, ok := withTraceContext(nil, op.Trace); ok {
			jobs[i].InsertOpts = &river.InsertOpts{Metadata: md}
		}
	}
	res, err := q.Client.InsertManyTx(ctx, tx, jobs)
	if err != nil {
		return nil, fmt.Errorf("insert operation jobs: %w", err)
	}
	return insertedIDs(res, want)
}

// insertedIDs returns the IDs of the jobs River inserted, in the order of
// want, their arguments: River returns the jobs as it inserted them, and
// each is matched by its arguments rather than by its place.
func insertedIDs[A comparable](res []*rivertype.JobInsertResult, want []A) ([]int64, error) {
	ids := make(map[A]int64, len(res))
	for _, r := range res {
		var args A
		if err := json.Unmarshal(r.Job.EncodedArgs, &args); err != nil {
			return nil, fmt.Errorf("read inserted job %d: %w", r.Job.ID, err)
		}
		ids[args] = r.Job.ID
	}
	out := make([]int64, len(want))
	for i, args := range want {
		id, ok := ids[args]
		if !ok {
			return nil, fmt.Errorf("insert jobs: no job came back for %+v", args)
		}
		out[i] = id
	}
	return out, nil
}

// EnqueueProcessorEvent implements operation.JobQueue.
func (q Queue) EnqueueProcessorEvent(ctx context.Context, tx pgx.Tx, eventID string) error {
	if _, err := q.Client.InsertTx(ctx, tx, ProcessorEventArgs{EventID: eventID}, nil); err != nil {
		return fmt.Errorf("insert processor event job: %w", err)
	}
	return nil
}

// EnqueueDeliveries implements webhooks.Jobs: one insert for them all.
func (q Queue) EnqueueDeliveries(ctx context.Context, tx pgx.Tx, deliveryIDs ...int64) ([]int64, error) {
	if len(deliveryIDs) == 0 {
		return nil, nil
	}
	jobs := make([]river.InsertManyParams, len(deliveryIDs))
	want := make([]DeliveryArgs, len(deliveryIDs))
	for i, id := range deliveryIDs {
		want[i] = DeliveryArgs{DeliveryID: id}
		jobs[i] = river.InsertManyParams{Args: want[i]}
	}
	res, err := q.Client.InsertManyTx(ctx, tx, jobs)
	if err != nil {
		return nil, fmt.Errorf("insert delivery jobs: %w", err)
	}
	return insertedIDs(res, want)
}

// liveStates are the states of a job that River will still run: waiting in
// any way, or running. A job whose worker died stays running until River's
// rescuer (RescueStuckJobsAfter) makes it retryable (Live leaves it out once
// stalled).
var liveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// backlogCap bounds the available jobs Backlog counts: one page of River's
// list, far above any alert threshold.
const backlogCap = 1000

// Backlog asks River how many jobs are available to work and not yet worked
// (at most backlogCap), and how long the oldest has waited since it was due.
func (q Queue) Backlog(ctx context.Context) (available int, oldest time.Duration, err error) {
	res, err := q.Client.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateAvailable).
		OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).First(backlogCap))
	if err != nil {
		return 0, 0, fmt.Errorf("list available jobs: %w", err)
	}
	if len(res.Jobs) > 0 {
		oldest = max(time.Since(res.Jobs[0].ScheduledAt), 0)
	}
	return len(res.Jobs), oldest, nil
}

// maxListed is the most jobs River lists at once (JobListParams.First).
const maxListed = 10_000

// Live implements operation.LiveJobs: the jobs among jobIDs River will still
// run (Unfinished), leaving out those it has left behind (stalled).
func (q Queue) Live(ctx context.Context, jobIDs []int64, now time.Time) (map[int64]bool, error) {
	jobs, err := q.unfinished(ctx, jobIDs)
	if err != nil {
		return nil, err
	}
	live := map[int64]bool{}
	for _, job := range jobs {
		if !q.stalled(job, now) {
			live[job.ID] = true
		}
	}
	return live, nil
}

// Unfinished implements webhooks.Jobs: the jobs among jobIDs River will
// still run, however late, a dead worker's running job included (River's
// rescuer runs it again).
func (q Queue) Unfinished(ctx context.Context, jobIDs []int64) (map[int64]bool, error) {
	jobs, err := q.unfinished(ctx, jobIDs)
	if err != nil {
		return nil, err
	}
	unfinished := map[int64]bool{}
	for _, job := range jobs {
		unfinished[job.ID] = true
	}
	return unfinished, nil
}

// abandonedStates are the states of a job River finalized without
// completing it.
var abandonedStates = []rivertype.JobState{rivertype.JobStateDiscarded, rivertype.JobStateCancelled}

// abandonedPage is how many abandoned delivery jobs Abandoned lists at once.
const abandonedPage = 1000

// Abandoned implements webhooks.Jobs: River lists the delivery jobs it
// discarded or cancelled, by the time it finalized them, on its index of
// finalized jobs; the cursor is River's own, marshalled.
func (q Queue) Abandoned(ctx context.Context, cursor string) (deliveryIDs, jobIDs []int64, next string, err error) {
	params := river.NewJobListParams().Kinds(DeliveryArgs{}.Kind()).States(abandonedStates...).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderAsc).First(abandonedPage)
	if cursor != "" {
		var after river.JobListCursor
		if err := after.UnmarshalText([]byte(cursor)); err != nil {
			return nil, nil, cursor, fmt.Errorf("read the cursor of abandoned jobs: %w", err)
		}
		params = params.After(&after)
	}
	res, err := q.Client.JobList(ctx, params)
	if err != nil {
		return nil, nil, cursor, fmt.Errorf("list abandoned delivery jobs: %w", err)
	}
	if len(res.Jobs) == 0 {
		return nil, nil, cursor, nil
	}
	for _, job := range res.Jobs {
		var args DeliveryArgs
		if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
			return nil, nil, cursor, fmt.Errorf("read delivery job %d: %w", job.ID, err)
		}
		deliveryIDs, jobIDs = append(deliveryIDs, args.DeliveryID), append(jobIDs, job.ID)
	}
	text, err := res.LastCursor.MarshalText()
	if err != nil {
		return nil, nil, cursor, fmt.Errorf("keep the cursor of abandoned jobs: %w", err)
	}
	return deliveryIDs, jobIDs, string(text), nil
}

// unfinished asks River for the jobs among jobIDs in a live state, at most
// maxListed at a time.
func (q Queue) unfinished(ctx context.Context, jobIDs []int64) ([]*rivertype.JobRow, error) {
	var jobs []*rivertype.JobRow
	for ids := range slices.Chunk(jobIDs, maxListed) {
		res, err := q.Client.JobList(ctx, river.NewJobListParams().IDs(ids...).States(liveStates...).First(len(ids)))
		if err != nil {
			return nil, fmt.Errorf("list live jobs: %w", err)
		}
		jobs = append(jobs, res.Jobs...)
	}
	return jobs, nil
}

// stalled reports a job River will run again only late: one running for
// longer than RescueAfter, whose worker died (River's rescuer, which passes
// every 30 s, makes it retryable only at its next pass), or one due for
// its retry longer ago than that, which no leader has made available (the
// scheduler is the leader's, and a dead leader's term must run out first).
// Its operation goes to the reconciler meanwhile: a job that does run again
// finds the key moved on, or loses the race to it, as any other runner.
func (q Queue) stalled(job *rivertype.JobRow, now time.Time) bool {
	if q.RescueAfter <= 0 {
		return false
	}
	switch job.State {
	case rivertype.JobStateRunning:
		return job.AttemptedAt != nil && now.Sub(*job.AttemptedAt) > q.RescueAfter
	case rivertype.JobStateRetryable:
		return now.Sub(job.ScheduledAt) > q.RescueAfter
	}
	return false
}

// InsertCooldown is the shortest time between two of River's insert
// notifications from the API's client (its FetchCooldown, which on a client
// that only inserts does nothing else). A notification is sent in the
// inserting transaction and holds Postgres's notification lock through that
// commit, so a burst of requests (processor webhooks, resends) must not
// notify for each; 5 ms still wakes the workers for every job but a burst's,
// and the jobs of a burst are picked up with the one that notified, or by the
// workers' poll.
const InsertCooldown = 5 * time.Millisecond

// RelayCooldown is InsertCooldown for the worker's client, whose inserts are
// the relay's batches (one notification each at most, from one transaction
// at a time) and the deliveries that finishing phases fan out. Every
// payment's job waits on the relay's notification: at 5 ms, a batch moved
// within 5 ms of the one before sent none and waited for the next batch's or
// the poll, and the 4-client p99 from the relay's insert to River's fetch was
// 16.5 ms against 8 ms at 1 ms, River's least.
const RelayCooldown = time.Millisecond

// NewInserter returns a River client that only inserts and lists jobs, for
// the API and the worker's relay, sweep and deliveries, which notifies of
// its inserts at most once per cooldown. Each job it inserts carries the
// trace of the inserting context (TraceInsert).
func NewInserter(pool *pgxpool.Pool, cooldown time.Duration, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger, FetchCooldown: cooldown,
		Middleware: []rivertype.Middleware{&TraceInsert{}}})
}

// WorkerConfig tunes the River client that runs jobs.
type WorkerConfig struct {
	// MaxWorkers is how many of the operations' and periodic jobs run at
	// once; WebhookWorkers how many webhook deliveries, in a queue of their
	// own, so that slow merchants never hold up payments.
	MaxWorkers, WebhookWorkers int
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
	// LedgerTimeout bounds one ledger comparison. Zero means JobTimeout.
	LedgerTimeout time.Duration
	// CompareLedger schedules the ledger comparison: false for a processor
	// that lists no ledger (operation.Processor.Ledger).
	CompareLedger bool
	// ReconcileInterval schedules the ledger comparison and ReapInterval the
	// reaper; zero leaves a job out.
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
	Ops        *operation.Runner
	Reconciler *operation.Reconciler
	Keys       *idempotency.Store
	// ReapPace paces the reaper: its Batch is how many keys (or events) one
	// statement reaps.
	ReapPace idempotency.ReapPace
	// EventRetention is how long a processed processor event is kept.
	EventRetention time.Duration
	// Webhooks is how long the webhooks' records are kept.
	Webhooks webhooks.Retention
	// Deliverer makes the attempts of webhook deliveries.
	Deliverer *webhooks.Deliverer
	// Reaped, when set, counts what the reaper reaped.
	Reaped func(expired, deleted int)
	// Logger gets each job attempt's line (TraceWork) and the periodic
	// jobs' reports.
	Logger *slog.Logger
	// Tracer makes each job attempt's span; nil means the global provider.
	Tracer trace.TracerProvider
	// Registry, when set, gets the attempts' latencies (TraceWork.Timed).
	Registry prometheus.Registerer
}

// NewWorker returns a River client that runs the operations' jobs, the
// processor events' and the webhook deliveries', and the periodic reconciler,
// ledger comparison and reaper. Each attempt of a job is a span in the
// trace of the code that inserted it, and one line in the log (TraceWork).
func NewWorker(pool *pgxpool.Pool, logger *slog.Logger, cfg WorkerConfig, deps Deps) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	var kinds []string
	if err := addWorker(workers, &kinds, &OperationWorker{Ops: deps.Ops, Backoff: cfg.Backoff}); err != nil {
		return nil, err
	}
	if err := addWorker(workers, &kinds, &ProcessorEventWorker{Ops: deps.Ops, Logger: deps.Logger}); err != nil {
		return nil, err
	}
	var periodic []*river.PeriodicJob
	if deps.Deliverer != nil {
		if err := addWorker(workers, &kinds, &DeliveryWorker{Deliverer: deps.Deliverer, Logger: deps.Logger, Backoff: cfg.Backoff}); err != nil {
			return nil, err
		}
	}
	if deps.Reconciler != nil {
		if err := addWorker(workers, &kinds, &LedgerWorker{Reconciler: deps.Reconciler, Logger: deps.Logger,
			RunTimeout: cfg.LedgerTimeout}); err != nil {
			return nil, err
		}
	}
	if cfg.ReconcileInterval > 0 && cfg.CompareLedger {
		periodic = append(periodic, everyInterval(cfg.ReconcileInterval, LedgerArgs{}))
	}
	if deps.Keys != nil {
		if err := addWorker(workers, &kinds, &ReapWorker{Keys: deps.Keys, Ops: deps.Ops, EventRetention: deps.EventRetention, Webhooks: deps.Webhooks,
			Pace: deps.ReapPace, Logger: deps.Logger, Reaped: deps.Reaped}); err != nil {
			return nil, err
		}
	}
	if cfg.ReapInterval > 0 {
		periodic = append(periodic, everyInterval(cfg.ReapInterval, ReapArgs{}))
	}
	work := NewTraceWork(deps.Tracer, deps.Logger)
	if deps.Registry != nil {
		work.Timed(deps.Registry, kinds...)
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: logger,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: cfg.MaxWorkers},
			QueueWebhooks:      {MaxWorkers: cfg.WebhookWorkers},
		},
		Workers:      workers,
		PeriodicJobs: periodic,
		JobTimeout:   cfg.JobTimeout,
		// A dead worker's running jobs are picked up in seconds or minutes,
		// not River's default hour.
		RescueStuckJobsAfter: cfg.RescueAfter,
		RetryPolicy:          cfg.Backoff,
		FetchPollInterval:    cfg.FetchPollInterval,
		// A payment's request waits for its job: pick jobs up within 2 ms of
		// their insert notification rather than River's default 100 ms.
		FetchCooldown: 2 * time.Millisecond,
		Middleware:    []rivertype.Middleware{&TraceInsert{}, work},
	})
}

// everyInterval is the periodic job args every interval, the first run at
// the start.
func everyInterval(interval time.Duration, args river.JobArgs) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return args, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}
