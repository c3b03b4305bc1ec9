package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/webhooks"
)

// OperationArgs is the job that drives one operation, of any declared kind,
// through its phases: one job kind for every kind, since the machinery is
// the same for all (operation.Runner).
type OperationArgs struct {
	// ResourceType is the operation's kind (payment, say), ID its id.
	ResourceType string `json:"resource_type"`
	ID           string `json:"id"`
}

// Kind names the job in River's tables.
func (OperationArgs) Kind() string { return "drive_operation" }

// InsertOpts lets River retry an operation as long as the operation wants:
// the retry budget (operation.Runner.MaxAttempts) decides when to hand it to
// the reconciler, so River must never discard it first.
func (OperationArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1000} }

// OperationWorker runs operation jobs.
type OperationWorker struct {
	river.WorkerDefaults[OperationArgs]
	Ops *operation.Runner
	// Backoff spaces the runs of a job whose database went away.
	Backoff Backoff
}

// Work runs the operation's remaining phases; River completes the job once
// it returns. A job of a kind that is not declared is
// cancelled: no retry would find it declared. A run that failed only because
// the database went away, or whose call the processor did not execute (a
// 429, no turn under its rate limit), is snoozed, its attempt not spent: for
// the processor's Retry-After where it gave one, else as an error would
// wait (waitForDatabase). A failover or the processor's rate limit costs an
// operation none of its retry budget. A run cut
// by the job's own deadline (JOB_TIMEOUT) is an attempt like any other.
func (w *OperationWorker) Work(ctx context.Context, job *river.Job[OperationArgs]) error {
	if _, err := w.Ops.Kinds.Kind(job.Args.ResourceType); err != nil {
		return river.JobCancel(err)
	}
	err := w.Ops.Run(ctx, job.Args.ResourceType, job.Args.ID, job.Attempt)
	if wait, notSent := operation.RetryAfter(err); notSent && wait > 0 {
		return river.JobSnooze(wait)
	}
	if operation.Unspent(ctx, err) {
		return waitForDatabase(w.Backoff, job.JobRow)
	}
	return stopWhenHandedOff(err)
}

// ProcessorEventArgs is the job that settles the operation a processor's
// webhook names, inserted with the event's record.
type ProcessorEventArgs struct {
	EventID string `json:"event_id"`
}

// Kind names the job in River's tables.
func (ProcessorEventArgs) Kind() string { return "settle_processor_event" }

// ProcessorEventAttempts is how often a processor event's job is tried: with
// the worker's backoff (RETRY_MAX_DELAY, a minute by default, between the
// later attempts) about three hours. An event still unprocessed after them
// stays in processor_events, never pruned, and its age is the metric
// payments_processor_event_oldest_unprocessed_seconds, which an alert watches.
const ProcessorEventAttempts = 200

// InsertOpts: see ProcessorEventAttempts.
func (ProcessorEventArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: ProcessorEventAttempts}
}

// ProcessorEventWorker runs processor event jobs.
type ProcessorEventWorker struct {
	river.WorkerDefaults[ProcessorEventArgs]
	Ops    *operation.Runner
	Logger *slog.Logger
}

// Work settles the event's operation, or checks the event against what
// another path recorded. An error leaves the job to River's retries; the
// worker's call and the reconciler settle the operation meanwhile.
func (w *ProcessorEventWorker) Work(ctx context.Context, job *river.Job[ProcessorEventArgs]) error {
	result, err := w.Ops.SettleFromEvent(ctx, job.Args.EventID)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if result == operation.EventContradiction {
		level = slog.LevelWarn
	}
	w.Logger.Log(ctx, level, "processor event processed", "event_id", job.Args.EventID, "result", result)
	return nil
}

// DeliveryArgs is the job that delivers one event to one webhook endpoint,
// inserted with the delivery in the transaction that stages the event.
type DeliveryArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Kind names the job in River's tables.
func (DeliveryArgs) Kind() string { return "deliver_webhook" }

// InsertOpts: the delivery's own schedule decides when it is over (the job
// snoozes between attempts, which River does not count); River's attempts
// count only the service's own failures, such as a database outage.
//
// Deliveries have a queue of their own (QueueWebhooks), with workers of
// their own: a slow or failing merchant endpoint must never hold up the
// jobs that move money.
func (DeliveryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 100, Queue: QueueWebhooks}
}

// QueueWebhooks is the River queue of webhook deliveries to merchants.
const QueueWebhooks = "webhooks"

// DeliveryWorker runs delivery jobs.
type DeliveryWorker struct {
	river.WorkerDefaults[DeliveryArgs]
	Deliverer *webhooks.Deliverer
	Logger    *slog.Logger
	// Backoff spaces the runs of a job whose database went away.
	Backoff Backoff
}

// Timeout is a delivery's own, whatever JOB_TIMEOUT says: its attempt's
// timeout and a margin (webhooks.PlaceHeld), so that an attempt ends by the
// receiver's answer or its own timeout, never cut by the job's, and never
// outlives its place among the attempts in flight.
func (w *DeliveryWorker) Timeout(*river.Job[DeliveryArgs]) time.Duration { return webhooks.PlaceHeld }

// Work makes the delivery's next attempt, and snoozes until the one after
// when it failed with attempts left. A claim or a record that failed because
// the database went away counts no attempt (the delivery's count moves only
// as an attempt is recorded) and snoozes the job (waitForDatabase): the
// attempt is made again under its number, its schedule's step unspent. One
// cut by the job's own deadline is an error, as any failure.
func (w *DeliveryWorker) Work(ctx context.Context, job *river.Job[DeliveryArgs]) error {
	wait, err := w.Deliverer.Deliver(ctx, job.Args.DeliveryID, job.ID)
	if database.WentAway(ctx, err) {
		return waitForDatabase(w.Backoff, job.JobRow)
	}
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// waitForDatabase is what a job returns when its run failed only because
// the database went away (a failover, a restart): a snooze for the delay an
// error would have waited, which River does not count as an attempt, so that
// an outage spends no job's MaxAttempts nor grows its backoff. River records
// the snooze once the database answers (or rescues the job, RescueAfter, when
// the outage outlasts its completer's retries).
func waitForDatabase(b Backoff, job *rivertype.JobRow) error {
	return river.JobSnooze(b.Delay(job.Attempt))
}

// stopWhenHandedOff cancels the job of an operation handed to the
// reconciler; any other error leaves the job to River's retries, which resume
// from the recovery point the key reached, with the same downstream key.
func stopWhenHandedOff(err error) error {
	if errors.Is(err, operation.ErrHandedToReconciler) {
		return river.JobCancel(err)
	}
	return err
}

// onePeriodicRun, embedded in a periodic job's args, keeps the job to one
// run at a time across all workers: while one is waiting or running, the
// periodic enqueuer inserts no other. A run that fails is not retried on top
// of the next one: the next periodic run starts afresh. The run of a worker
// that died holds the next up until River rescues it (RescueAfter), and the
// periodic enqueuer runs on River's leader only, which a dead one hands on
// only when its term expires: right for the ledger comparison and the
// reaper, which can wait; the reconciler, which cannot, runs a loop in every
// worker instead (operation.Reconciler.Loop).
type onePeriodicRun struct{}

// InsertOpts implements river.JobArgsWithInsertOpts.
func (onePeriodicRun) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: 1,
		UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
		}},
	}
}

// LedgerArgs is the periodic job that compares the processor's ledger with
// ours.
type LedgerArgs struct{ onePeriodicRun }

// Kind names the job in River's tables.
func (LedgerArgs) Kind() string { return "compare_ledger" }

// LedgerWorker runs the ledger comparison, which pages through the whole
// window and so may take longer than a reconcile run.
type LedgerWorker struct {
	river.WorkerDefaults[LedgerArgs]
	Reconciler *operation.Reconciler
	Logger     *slog.Logger
	RunTimeout time.Duration
}

// Timeout implements river.Worker.
func (w *LedgerWorker) Timeout(*river.Job[LedgerArgs]) time.Duration { return w.RunTimeout }

// Work compares the ledgers once.
func (w *LedgerWorker) Work(ctx context.Context, _ *river.Job[LedgerArgs]) error {
	r, err := w.Reconciler.CompareLedger(ctx)
	if r.Repaired+r.Flagged > 0 {
		w.Logger.InfoContext(ctx, "compared the ledgers", "repaired", r.Repaired, "flagged", r.Flagged)
	}
	return err
}

// ReapArgs is the periodic job that deletes expired idempotency keys.
type ReapArgs struct{ onePeriodicRun }

// Kind names the job in River's tables.
func (ReapArgs) Kind() string { return "reap_idempotency_keys" }

// ReapWorker turns finished keys past their retention into tombstones, and
// deletes tombstones past theirs, and processed processor events past
// theirs, in batches.
type ReapWorker struct {
	river.WorkerDefaults[ReapArgs]
	Keys           *idempotency.Store
	Ops            *operation.Runner
	EventRetention time.Duration
	// Webhooks is how long the webhooks' events, deliveries and expired
	// secrets are kept.
	Webhooks webhooks.Retention
	// Pace paces the keys' reaping; its Batch is also the most processor
	// events, deliveries, events or secrets one statement prunes.
	Pace   idempotency.ReapPace
	Logger *slog.Logger
	// Reaped, when set, is told how many keys each run expired and how
	// many tombstones it deleted.
	Reaped func(expired, deleted int)
}

// Work reaps until no expired key or event is left.
func (w *ReapWorker) Work(ctx context.Context, _ *river.Job[ReapArgs]) error {
	expired, deleted, err := w.Keys.Reap(ctx, w.Pace)
	if expired+deleted > 0 {
		w.Logger.InfoContext(ctx, "reaped idempotency keys", "expired", expired, "tombstones_deleted", deleted)
	}
	if w.Reaped != nil {
		w.Reaped(expired, deleted)
	}
	if err != nil {
		return err
	}
	pruned, err := w.Ops.PruneProcessorEvents(ctx, w.EventRetention, w.Pace.Batch)
	if pruned > 0 {
		w.Logger.InfoContext(ctx, "pruned processor events", "deleted", pruned)
	}
	if err != nil {
		return err
	}
	deliveries, events, secrets, err := webhooks.Prune(ctx, w.Ops.DB, w.Webhooks, w.Pace.Batch)
	if deliveries+events+secrets > 0 {
		w.Logger.InfoContext(ctx, "pruned webhooks", "deliveries", deliveries, "events", events, "secrets", secrets)
	}
	return err
}
