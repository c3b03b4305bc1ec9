package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// ErrHandedToReconciler reports an operation whose retry budget is spent
// with its outcome still unknown: it was marked for reconciliation, and the
// job that drove it should stop. It is never dropped.
var ErrHandedToReconciler = errors.New("retry budget spent: handed to the reconciler")

// FailureProcessorError is the failure code of an operation the service gave
// up on: the processor confirmed, through the fence, that nothing was or
// ever will be made under its downstream key.
const FailureProcessorError = "processor_error"

// CompleteFunc completes the job that drives an operation, inside the
// transaction of the final phase, so the job ends exactly when the key does.
type CompleteFunc func(ctx context.Context, tx pgx.Tx) error

// Operations is the state machine of the operations that call the processor,
// charges and refunds alike. Each moves its key started → <created> →
// finished, one atomic phase at a time, so that a crash anywhere resumes from
// the recovery point:
//
//   - the outcome phase makes the one processor call, with the operation's
//     downstream key, and records a definite answer as it advances the key;
//   - the finish phase stores the final response, stages the event, clears
//     any reconciliation mark and completes the job; it calls nothing outside,
//     so it commits in the outcome phase's transaction (see
//     idempotency.Phase): one commit records the answer and finishes the key.
//     A key found at the created point (a tool or an older worker stopped
//     there) is finished by the finish phase alone.
//
// An unknown outcome is retried with the same downstream key until the retry
// budget is spent; then the operation is marked for reconciliation. The
// reconciler asks the processor for the operation by key, makes it again
// while it is confirmed absent, and past the deadline gives up through the
// fence: it closes the key at the processor and records what the close
// reports, so that giving up and a late success can never both happen.
type Operations struct {
	DB        *pgxpool.Pool
	Keys      *idempotency.Store
	Processor Processor
	// Render turns an operation in its final state into the response stored
	// on its key and replayed to every retry.
	Render Renderer
	// MaxAttempts is the retry budget of a job: after that many attempts
	// with an unknown outcome the operation goes to the reconciler.
	MaxAttempts int
	// Deadline is how long after its creation (database clock) an operation
	// may still be attempted. It is policy, when to stop trying, not what
	// makes giving up safe: the fence does that.
	Deadline time.Duration
	// Observer, when set, is told what the operations settle.
	Observer Observer
	// Subscribers, when set, hear of every event staged.
	Subscribers Subscribers
}

// Observer counts what the operations do, for metrics.
type Observer interface {
	// Settled is called once the commit of path (PathWorker, PathWebhook or
	// PathReconciler) has recorded the outcome of an operation of
	// resourceType and finished its key.
	Settled(resourceType, path string)
	// ProcessorEvent is called with the result of each processor event
	// processed (EventSettled, EventAgreed, EventContradiction).
	ProcessorEvent(result string)
	// Attempted is called after each attempt of an operation's job, with its
	// result (AttemptOK, AttemptUnknown, AttemptFailed).
	Attempted(resourceType, result string)
	// Reconciliation is called as operations are scheduled for the
	// reconciler, and as it settles them or not (Reconciliation*).
	Reconciliation(result string, n int)
}

// Results of an operation's job attempt, for Observer.Attempted.
const (
	// AttemptOK is an attempt that ended without error: the operation
	// settled, by this run or another.
	AttemptOK = "ok"
	// AttemptUnknown is an attempt whose processor outcome is unknown: it is
	// tried again, with the same downstream key.
	AttemptUnknown = "unknown_outcome"
	// AttemptFailed is an attempt that failed otherwise (the store, say).
	AttemptFailed = "failed"
)

// Results of reconciliation, for Observer.Reconciliation.
const (
	ReconciliationScheduled = "scheduled"
	ReconciliationSettled   = "settled"
	ReconciliationLost      = "lost"
	ReconciliationUnsettled = "unsettled"
)

// The paths that settle operations. Exactly one records each operation's
// outcome: the one whose conditional commit moves its key past started. It
// is stored on the operation, as settled_by.
const (
	// PathWorker is the operation's job, which makes the processor call.
	PathWorker = "worker"
	// PathWebhook is the processor's webhook about the operation.
	PathWebhook = "webhook"
	// PathReconciler is the reconciler: a lookup by key, or the fence.
	PathReconciler = "reconciler"
)

// operation is what the state machine needs of one kind of operation; the
// charge and the refund each have one (charge.go, refund_op.go).
type operation interface {
	// resourceType names what the operation's key created, as stored on the
	// key and in the reconciliation queue.
	resourceType() string
	// createdPoint is the recovery point once the outcome is recorded.
	createdPoint() string
	// load reads the operation's row as the processor call needs it.
	load(ctx context.Context, db database.DBTX, id string) (pending, error)
	// find, close and gaveUp are the processor's lookup by key, its fence,
	// and what an operation given up on records.
	find(ctx context.Context, key string) (Outcome, bool, error)
	close(ctx context.Context, key string) (Outcome, bool, error)
	gaveUp() Outcome
	// record writes a definite outcome on the operation's rows in tx, and
	// the path that learned it.
	record(ctx context.Context, tx pgx.Tx, id string, out Outcome, path string) error
	// finish stages the operation's event and clears its reconciliation mark
	// in tx (settle), and renders its final response.
	finish(ctx context.Context, tx pgx.Tx, id string) (idempotency.Response, error)
}

// pending is an operation as loaded for its outcome phase.
type pending struct {
	// keyID is the operation's idempotency key, and recoveryPoint where it
	// stood when read; nil once reaped, which only happens to finished keys.
	keyID         *int64
	recoveryPoint *string
	// downstreamKey is the processor idempotency key of the operation.
	downstreamKey string
	// pastDeadline is whether the deadline has passed, by the database clock.
	pastDeadline bool
	// amount and currency are what the operation asks of the processor;
	// currency is the payment's, for a refund too.
	amount   int64
	currency string
	// recorded is the outcome recorded on the operation; nil while it has
	// none.
	recorded *Outcome
	// attempt makes the processor call.
	attempt func(ctx context.Context) (Outcome, error)
}

// outcome is what the outcome phase learned, and whether it gave up.
type outcome struct {
	Outcome
	gaveUp bool
}

// run drives the operation id from wherever its key stands, as its job's
// attempt-th attempt. When the attempt fails and the retry budget is spent,
// the operation is marked for reconciliation and ErrHandedToReconciler is
// returned (wrapping the cause): the job should stop.
func (o *Operations) run(ctx context.Context, op operation, id string, attempt int, complete CompleteFunc) error {
	_, err := o.drive(ctx, op, id, PathWorker, complete)
	if o.Observer != nil {
		result := AttemptOK
		switch {
		case errors.Is(err, ErrProcessorUnknown):
			result = AttemptUnknown
		case err != nil:
			result = AttemptFailed
		}
		o.Observer.Attempted(op.resourceType(), result)
	}
	span := trace.SpanFromContext(ctx)
	if err != nil && attempt < o.MaxAttempts {
		span.AddEvent("outcome unknown: retry with the same downstream key", trace.WithAttributes(
			attribute.Int("attempt", attempt), attribute.Int("max_attempts", o.MaxAttempts), attribute.String("error", err.Error())))
	}
	if err == nil || attempt < o.MaxAttempts {
		return err
	}
	span.AddEvent("retry budget spent: handed to the reconciler", trace.WithAttributes(attribute.Int("attempt", attempt)))
	// The job's context may be the reason it failed; marking must not be.
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if markErr := MarkForReconciliation(markCtx, o.DB, op.resourceType(), id); markErr != nil {
		return fmt.Errorf("%w; and marking for reconciliation failed: %w", err, markErr)
	}
	if o.Observer != nil {
		o.Observer.Reconciliation(ReconciliationScheduled, 1)
	}
	return fmt.Errorf("%w: %w", ErrHandedToReconciler, err)
}

// reconcile drives a marked operation with the reconciler's outcome phase.
// It reports whether this run finished the key; false means another runner
// settled it first.
func (o *Operations) reconcile(ctx context.Context, op operation, id string) (bool, error) {
	return o.drive(ctx, op, id, PathReconciler, nil)
}

// LearnOutcome runs only the outcome phase of the operation id of
// resourceType, if its key is still at started: the run drives it too; tests
// use it to stop an operation in between.
func (o *Operations) LearnOutcome(ctx context.Context, resourceType, id string) error {
	op, err := o.operation(resourceType)
	if err != nil {
		return err
	}
	p, err := o.load(ctx, op, id)
	if err != nil || p.keyID == nil {
		return err
	}
	_, _, err = o.Keys.RunPhase(ctx, *p.keyID, idempotency.RecoveryStarted, o.outcomePhase(op, id, p, PathWorker))
	return err
}

// drive runs the phases the operation's key has not passed yet, learning
// the outcome by path (PathWorker or PathReconciler). The operation and its
// key's recovery point are read once, here, in one statement: the outcome
// phase calls the processor with what was read.
func (o *Operations) drive(ctx context.Context, op operation, id, path string, complete CompleteFunc) (bool, error) {
	p, err := o.load(ctx, op, id)
	if err != nil {
		return false, err
	}
	return o.driveWith(ctx, op, id, p, path, o.outcomePhase(op, id, p, path), complete)
}

// driveWith runs the phases of operation id, as loaded in p, from its key's
// recovery point: first, which records the outcome path learned, and the
// finish phase, which commits in first's transaction. It reports whether
// this run finished the key; when it did from started, path settled the
// operation, and the Observer is told.
func (o *Operations) driveWith(ctx context.Context, op operation, id string, p pending, path string, first idempotency.Phase, complete CompleteFunc) (bool, error) {
	if p.keyID == nil || p.recoveryPoint == nil {
		return false, nil
	}
	finished, err := o.Keys.DriveFrom(ctx, *p.keyID, *p.recoveryPoint, idempotency.Phases{
		idempotency.RecoveryStarted: first,
		op.createdPoint():           o.finishPhase(op, id, complete),
	})
	if finished && *p.recoveryPoint == idempotency.RecoveryStarted {
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(attribute.String("payments.settled_by", path))
		span.AddEvent("operation settled", trace.WithAttributes(attribute.String("path", path),
			attribute.String("resource_type", op.resourceType()), attribute.String("resource_id", id)))
		if o.Observer != nil {
			o.Observer.Settled(op.resourceType(), path)
		}
	}
	return finished, err
}

// load reads operation id; its keyID is nil when the key was reaped, and so
// the operation is finished.
func (o *Operations) load(ctx context.Context, op operation, id string) (pending, error) {
	p, err := op.load(ctx, o.DB, id)
	if err != nil {
		return pending{}, fmt.Errorf("load %s %s: %w", op.resourceType(), id, err)
	}
	return p, nil
}

// outcomePhase is the phase whose one foreign side effect is the processor
// call. A definite answer is recorded in the transaction that moves the key
// to the created point; an unknown outcome is returned as an error, to be
// tried again with the same downstream key.
func (o *Operations) outcomePhase(op operation, id string, p pending, path string) idempotency.Phase {
	var out outcome
	return idempotency.Phase{
		Call: func(ctx context.Context, _ idempotency.Key) error {
			var err error
			out, err = o.learn(ctx, op, p, path == PathReconciler)
			return err
		},
		Commit: func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
			if err := op.record(ctx, tx, id, out.Outcome, path); err != nil {
				return idempotency.Next{}, err
			}
			if out.gaveUp {
				detail := fmt.Sprintf("gave up on %s %s: the processor confirmed through the fence that nothing was made", op.resourceType(), id)
				if _, err := flagForReview(ctx, tx, op.resourceType()+"_given_up", id, detail); err != nil {
					return idempotency.Next{}, err
				}
			}
			return idempotency.AdvanceTo(op.createdPoint()), nil
		},
	}
}

// learn finds out the operation's outcome. The worker makes the call; the
// reconciler first asks what happened under the downstream key, makes the
// call again only while the processor confirms it absent, and past the
// deadline gives up through the fence.
func (o *Operations) learn(ctx context.Context, op operation, p pending, reconciling bool) (outcome, error) {
	if reconciling {
		out, found, err := op.find(ctx, p.downstreamKey)
		switch {
		case err != nil:
			return outcome{}, fmt.Errorf("find %s: %w", p.downstreamKey, err)
		case found:
			return outcome{Outcome: out}, nil
		case p.pastDeadline:
			return o.giveUp(ctx, op, p)
		}
	}
	out, err := p.attempt(ctx)
	if errors.Is(err, ErrKeyClosed) {
		// Another runner gave up first: closing again answers what it learned.
		trace.SpanFromContext(ctx).AddEvent("downstream key closed by another runner", trace.WithAttributes(
			attribute.String("downstream_key", p.downstreamKey)))
		return o.giveUp(ctx, op, p)
	}
	if err != nil {
		return outcome{}, err
	}
	crash.At(op.resourceType() + "_" + CrashAfterProcessorResponse)
	return outcome{Outcome: out}, nil
}

// giveUp closes the operation's downstream key at the processor, the fence,
// and returns what the close reports: the operation, if one was made before
// the close (the close waits for one in flight), else the given-up outcome.
func (o *Operations) giveUp(ctx context.Context, op operation, p pending) (outcome, error) {
	span := trace.SpanFromContext(ctx)
	span.AddEvent("fence: closing the downstream key", trace.WithAttributes(attribute.String("downstream_key", p.downstreamKey)))
	out, made, err := op.close(ctx, p.downstreamKey)
	switch {
	case err != nil:
		return outcome{}, fmt.Errorf("close %s: %w", p.downstreamKey, err)
	case made:
		span.AddEvent("fence closed: the operation was made first", trace.WithAttributes(attribute.String("processor_id", out.ID)))
		return outcome{Outcome: out}, nil
	}
	span.AddEvent("fence closed: nothing was made, giving up")
	return outcome{Outcome: op.gaveUp(), gaveUp: true}, nil
}

// finishPhase stores the final response, stages the event that follows it,
// clears the reconciliation mark and completes the job.
func (o *Operations) finishPhase(op operation, id string, complete CompleteFunc) idempotency.Phase {
	return idempotency.Phase{Commit: func(ctx context.Context, tx pgx.Tx, _ idempotency.Key) (idempotency.Next, error) {
		resp, err := op.finish(ctx, tx, id)
		if err != nil {
			return idempotency.Next{}, err
		}
		if complete != nil {
			if err := complete(ctx, tx); err != nil {
				return idempotency.Next{}, fmt.Errorf("complete job: %w", err)
			}
		}
		return idempotency.Finish(resp), nil
	}}
}

// settleOperation stages the event of a finished operation and clears its
// reconciliation mark, if any, in one statement.
const settleOperation = `
WITH settled AS (DELETE FROM reconciliations WHERE resource_type = $6 AND resource_id = $4)
INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
VALUES ($1, $2, $3, $4, $5, now())`

// settle writes, in the finishing transaction tx, the immutable event about
// object, an operation of resourceType that finished, clears the
// operation's reconciliation mark, and tells the Subscribers.
func (o *Operations) settle(ctx context.Context, tx pgx.Tx, resourceType, tenantID, eventType, resourceID string, object any) error {
	data, err := json.Marshal(object)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	eventID := NewID("evt_")
	_, err = tx.Exec(ctx, settleOperation, eventID, tenantID, eventType, resourceID, data, resourceType)
	if err != nil {
		return fmt.Errorf("stage event and clear the reconciliation mark: %w", err)
	}
	if o.Subscribers != nil {
		return o.Subscribers.Notify(ctx, tx, tenantID, eventID, eventType)
	}
	return nil
}

// Subscribers hear of each event in the transaction that stages it, so that
// what they write (the deliveries of the tenant's webhook endpoints, and
// their jobs: package endpoints) exists exactly when the event does.
type Subscribers interface {
	Notify(ctx context.Context, tx pgx.Tx, tenantID, eventID, eventType string) error
}

const markForReconciliation = `
INSERT INTO reconciliations (resource_type, resource_id) VALUES ($1, $2)
ON CONFLICT DO NOTHING`

// MarkForReconciliation hands an operation whose outcome could not be
// learned to the reconciler. Marking twice is marking once.
func MarkForReconciliation(ctx context.Context, db database.DBTX, resourceType, id string) error {
	if _, err := db.Exec(ctx, markForReconciliation, resourceType, id); err != nil {
		return fmt.Errorf("mark %s %s for reconciliation: %w", resourceType, id, err)
	}
	return nil
}

// CrashAfterProcessorResponse is the worker's crash point, for the crash
// tests (see package crash), prefixed with the resource type:
// "payment_after_processor_response", "refund_after_processor_response". It
// is reached when the processor has answered and the transaction that
// records the answer and finishes the key has not committed: the only
// moment a worker's death can lose what the processor did.
const CrashAfterProcessorResponse = "after_processor_response"

// CrashPoints lists every crash point of the worker.
func CrashPoints() []string {
	return []string{PaymentResourceType + "_" + CrashAfterProcessorResponse, RefundResourceType + "_" + CrashAfterProcessorResponse}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
