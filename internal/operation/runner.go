package operation

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
// with its outcome still unknown, or that only the processor can settle now
// (ErrAwaitingProcessor): it was marked for reconciliation, and the job that
// drove it should stop. It is never dropped.
var ErrHandedToReconciler = errors.New("handed to the reconciler")

// Runner is the state machine of every kind of operation. Each moves its key
// started → <object>_created → finished, one atomic phase at a time, so that
// a crash anywhere resumes from the recovery point:
//
//   - the outcome phase makes the one processor call, with the operation's
//     downstream key, and records a definite answer as it advances the key;
//   - the finish phase stores the final response, stages the event and clears
//     any reconciliation mark; it calls nothing outside,
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
type Runner struct {
	DB    *pgxpool.Pool
	Keys  *idempotency.Store
	Kinds *Registry
	// MaxAttempts is the retry budget of a job: after that many attempts
	// with an unknown outcome the operation goes to the reconciler.
	MaxAttempts int
	// Deadline is how long after its creation (database clock) an operation
	// may still be attempted. It is policy, when to stop trying, not what
	// makes giving up safe: the fence does that.
	Deadline time.Duration
	// Processor is what the processor can do: how the reconciler asks it
	// (a lookup, a call made again, its webhook) and whether it can give up
	// through the fence.
	Processor Processor
	// Observer, when set, is told what the operations settle.
	Observer Observer
	// Subscribers, when set, hear of every event staged.
	Subscribers Subscribers
}

// Observer counts what the operations do, for metrics.
type Observer interface {
	// Settled is called once the commit of path (SettledByWorker, SettledByWebhook or
	// SettledByReconciler) has recorded the outcome of an operation of
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
	// AttemptNotSent is an attempt whose call the processor did not execute
	// (ErrNotSent: a 429, or no turn under its rate limit): made again
	// under the same key, its attempt not spent.
	AttemptNotSent = "not_sent"
	// AttemptFailed is an attempt that failed otherwise (the store, say).
	AttemptFailed = "failed"
)

// AttemptResults lists every attempt result, for metrics that start at zero.
var AttemptResults = []string{AttemptOK, AttemptUnknown, AttemptNotSent, AttemptFailed}

// Results of reconciliation, for Observer.Reconciliation.
const (
	ReconciliationScheduled = "scheduled"
	ReconciliationSettled   = "settled"
	ReconciliationLost      = "lost"
	ReconciliationUnsettled = "unsettled"
)

// ReconciliationResults lists every result, for metrics that start at zero.
var ReconciliationResults = []string{ReconciliationScheduled, ReconciliationSettled, ReconciliationLost, ReconciliationUnsettled}

// Run drives operation id of resourceType from wherever its key stands, as
// its job's attempt-th attempt. The job is not completed in the finishing
// transaction: River's completer ends it, in batches, once Run returns (a
// single-job completion in each finishing transaction cost the database more
// than the rest of the worker's statements together, under load). A job that
// finished the key and died before River completed it runs again, finds the
// key finished and does nothing. When the
// attempt fails and the retry budget is spent, or the failure is one only
// the processor can end (ErrAwaitingProcessor), the operation is marked for
// reconciliation and ErrHandedToReconciler is returned (wrapping the cause):
// the job should stop.
func (o *Runner) Run(ctx context.Context, resourceType, id string, attempt int) error {
	k, err := o.Kinds.Kind(resourceType)
	if err != nil {
		return err
	}
	_, err = o.drive(ctx, k, id, SettledByWorker)
	if o.Observer != nil {
		result := AttemptOK
		switch {
		case errors.Is(err, ErrNotSent):
			result = AttemptNotSent
		case errors.Is(err, ErrProcessorUnknown):
			result = AttemptUnknown
		case err != nil:
			result = AttemptFailed
		}
		o.Observer.Attempted(resourceType, result)
	}
	span := trace.SpanFromContext(ctx)
	// An operation only the processor can settle now goes to the
	// reconciler at once: a retry could learn nothing more.
	awaiting := errors.Is(err, ErrAwaitingProcessor)
	if err != nil && attempt < o.MaxAttempts && !awaiting {
		span.AddEvent("outcome unknown: retry with the same downstream key", trace.WithAttributes(
			attribute.Int("attempt", attempt), attribute.Int("max_attempts", o.MaxAttempts), attribute.String("error", err.Error())))
	}
	if err == nil || (attempt < o.MaxAttempts && !awaiting) || Unspent(ctx, err) {
		return err
	}
	span.AddEvent("handed to the reconciler", trace.WithAttributes(attribute.Int("attempt", attempt), attribute.Bool("awaiting_processor", awaiting)))
	// The job's context may be the reason it failed; marking must not be.
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if markErr := MarkForReconciliation(markCtx, o.DB, resourceType, id); markErr != nil {
		return fmt.Errorf("%w; and marking for reconciliation failed: %w", err, markErr)
	}
	if o.Observer != nil {
		o.Observer.Reconciliation(ReconciliationScheduled, 1)
	}
	return fmt.Errorf("%w: %w", ErrHandedToReconciler, err)
}

// DatabaseWentAway reports whether an attempt run under ctx failed only
// because the database went away (database.WentAway: a failover, say, not
// the attempt's own deadline), with no processor outcome left unknown:
// such an attempt spends none of the retry budget, and its job waits for
// the database (jobs.OperationWorker). An attempt cut by its own deadline
// spends its budget, so that an operation whose statements keep
// outlasting JOB_TIMEOUT reaches the reconciler.
func DatabaseWentAway(ctx context.Context, err error) bool {
	return !errors.Is(err, ErrProcessorUnknown) && database.WentAway(ctx, err)
}

// Unspent reports whether an attempt that failed with err spends none of
// the retry budget: the database went away (DatabaseWentAway), or the
// processor did not execute its call (ErrNotSent). Its job waits and runs
// the attempt again under its number (jobs.OperationWorker).
func Unspent(ctx context.Context, err error) bool {
	return DatabaseWentAway(ctx, err) || errors.Is(err, ErrNotSent)
}

// LearnOutcome runs only the outcome phase of operation id of resourceType,
// if its key is still at started: Run drives it too; tests use it to stop an
// operation in between.
func (o *Runner) LearnOutcome(ctx context.Context, resourceType, id string) error {
	k, err := o.Kinds.Kind(resourceType)
	if err != nil {
		return err
	}
	p, err := o.load(ctx, k, id)
	if err != nil || p.KeyID == nil {
		return err
	}
	_, _, err = o.Keys.RunPhase(ctx, *p.KeyID, idempotency.RecoveryStarted, o.outcomePhase(k, id, p, SettledByWorker, nil))
	return err
}

// drive runs the phases the operation's key has not passed yet, learning
// the outcome by path (SettledByWorker or SettledByReconciler). The operation and its
// key's recovery point are read once, here, in one statement: the outcome
// phase calls the processor with what was read.
func (o *Runner) drive(ctx context.Context, k Kind, id, path string) (bool, error) {
	p, err := o.load(ctx, k, id)
	if err != nil {
		return false, err
	}
	r := &recorded{}
	return o.driveWith(ctx, k, id, p, path, o.outcomePhase(k, id, p, path, r), r)
}

// driveWith runs the phases of operation id, as loaded in p, from its key's
// recovery point: first, which records the outcome path learned (and notes it
// in r), and the finish phase, which commits in first's transaction. It reports whether
// this run finished the key; when it did from started, path settled the
// operation, and the Observer is told.
func (o *Runner) driveWith(ctx context.Context, k Kind, id string, p Pending, path string, first idempotency.Phase, r *recorded) (bool, error) {
	if p.KeyID == nil || p.RecoveryPoint == nil {
		return false, nil
	}
	n := k.Names()
	finished, err := o.Keys.DriveFrom(ctx, *p.KeyID, *p.RecoveryPoint, idempotency.Phases{
		idempotency.RecoveryStarted: first,
		n.CreatedPoint():            o.finishPhase(k, id, r),
	})
	if finished && *p.RecoveryPoint == idempotency.RecoveryStarted {
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(attribute.String("payments.settled_by", path))
		span.AddEvent("operation settled", trace.WithAttributes(attribute.String("path", path),
			attribute.String("resource_type", n.Type), attribute.String("resource_id", id)))
		if o.Observer != nil {
			o.Observer.Settled(n.Type, path)
		}
	}
	return finished, err
}

// load reads operation id; its KeyID is nil when the key was reaped, and so
// the operation is finished.
func (o *Runner) load(ctx context.Context, k Kind, id string) (Pending, error) {
	p, err := Load(ctx, o.DB, k, id, o.Deadline)
	if err != nil {
		return Pending{}, fmt.Errorf("load %s %s: %w", k.Names().Type, id, err)
	}
	return p, nil
}

// outcome is what the outcome phase learned, and whether it gave up.
type outcome struct {
	Outcome
	gaveUp bool
}

// outcomePhase is the phase whose one foreign side effect is the processor
// call. A definite answer is recorded in the transaction that moves the key
// to the created point; an unknown outcome is returned as an error, to be
// tried again with the same downstream key.
func (o *Runner) outcomePhase(k Kind, id string, p Pending, path string, r *recorded) idempotency.Phase {
	var out outcome
	n := k.Names()
	return idempotency.Phase{
		Call: func(ctx context.Context, _ idempotency.Key) error {
			var err error
			out, err = o.learn(ctx, k, id, p, path == SettledByReconciler)
			return err
		},
		Commit: func(ctx context.Context, tx *database.Tx, _ idempotency.Key) (idempotency.Next, error) {
			if err := r.record(tx, k, id, p.TenantID, out.Outcome, path); err != nil {
				return idempotency.Next{}, err
			}
			if out.gaveUp {
				detail := fmt.Sprintf("gave up on %s %s: the processor confirmed through the fence that nothing was made", n.Type, id)
				if _, err := flagForReview(ctx, tx, n.Reviews().GivenUp, id, detail); err != nil {
					return idempotency.Next{}, err
				}
			}
			return idempotency.AdvanceTo(n.CreatedPoint()), nil
		},
	}
}

// learn finds out the operation's outcome. The worker makes the call; the
// reconciler asks the processor what happened under the downstream key as
// the processor can be asked (Processor.Lookup), and makes the call again
// only while nothing is known to be made. Past the deadline, by the
// database's clock, no path makes the call again: the operation is looked
// up, then given up through the fence, or, for a processor without one,
// flagged for review and left to the processor's answer. That keeps every
// call inside the processor's key window, which the worker's start-up
// check holds beyond the deadline.
func (o *Runner) learn(ctx context.Context, k Kind, id string, p Pending, reconciling bool) (outcome, error) {
	n := k.Names()
	key := n.DownstreamKey(id)
	if reconciling || p.PastDeadline {
		if o.Processor.Lookup == LookupQuery {
			out, found, err := p.Find(ctx)
			switch {
			case err != nil:
				return outcome{}, fmt.Errorf("find %s: %w", key, err)
			case found:
				return outcome{Outcome: out}, nil
			}
		}
		if p.PastDeadline {
			if o.Processor.Fence {
				return o.giveUp(ctx, k, p, key)
			}
			if err := o.flagUnfenced(ctx, k, id); err != nil {
				return outcome{}, err
			}
			return outcome{}, fmt.Errorf("%w: %s %s is past its deadline: nothing is made under %s again, and the processor has no fence to give up with",
				ErrAwaitingProcessor, n.Type, id, key)
		}
		if o.Processor.Lookup == LookupNone {
			return outcome{}, fmt.Errorf("%w: %s %s: the processor has no lookup; its webhook settles the operation", ErrAwaitingProcessor, n.Type, id)
		}
	}
	out, err := p.Make(WithShare(ctx, ShareCall))
	switch {
	case errors.Is(err, ErrKeyClosed) && o.Processor.Fence:
		// Another runner gave up first: closing again answers what it learned.
		trace.SpanFromContext(ctx).AddEvent("downstream key closed by another runner", trace.WithAttributes(
			attribute.String("downstream_key", key)))
		return o.giveUp(ctx, k, p, key)
	case errors.Is(err, ErrSavedFailure):
		return outcome{}, o.flagSavedFailure(ctx, k, id, key, err)
	case err != nil:
		return outcome{}, fmt.Errorf("%s %s: %w", n.Object, id, err)
	}
	crash.At(n.CrashPoint())
	return outcome{Outcome: out}, nil
}

// ErrAwaitingProcessor reports an operation no call can settle until the
// processor speaks: it has no lookup, or the operation is past its deadline
// and nothing is made under its key for a processor with no fence, or the
// processor answers its key with a failure it saved (ErrSavedFailure). The
// operation is handed to the reconciler at once and stays marked; the
// processor's webhook, a lookup or a later pass settles it.
var ErrAwaitingProcessor = errors.New("waiting for the processor")

// ErrSavedFailure reports a call the processor answered with a failure it
// saved for the downstream key (Stripe saves a 5xx and replays it to every
// request made again with the key): making the call again can never learn
// more. It wraps ErrProcessorUnknown too, since the operation may or may
// not exist; the runner opens its review case (Reviews.SavedFailure) at
// once and leaves it to the lookups, the fence and the processor's webhook.
var ErrSavedFailure = errors.New("the processor replays a failure it saved for the key")

// flagSavedFailure opens, once, the review case of an operation whose call
// the processor answers with a failure it saved, and returns the error that
// hands the operation to the reconciler.
func (o *Runner) flagSavedFailure(ctx context.Context, k Kind, id, key string, cause error) error {
	n := k.Names()
	detail := fmt.Sprintf("%s %s: the processor (%s) answers every call under %s with a failure it saved (%v): "+
		"the lookups and the fence settle it, or the processor's webhook; check it at the processor",
		n.Type, id, o.Processor.Name, key, cause)
	if _, err := flagForReview(ctx, o.DB, n.Reviews().SavedFailure, id, detail); err != nil {
		return err
	}
	trace.SpanFromContext(ctx).AddEvent("the processor replays a saved failure: flagged for review")
	return fmt.Errorf("%w: %s %s: %w", ErrAwaitingProcessor, n.Object, id, cause)
}

// flagUnfenced opens, once, the review case of an operation past its
// deadline that cannot be given up: the processor has no fence.
func (o *Runner) flagUnfenced(ctx context.Context, k Kind, id string) error {
	n := k.Names()
	detail := fmt.Sprintf("%s %s is past its deadline, and the processor (%s) has no fence to give it up with: "+
		"it stays processing until the processor answers (its webhook, or a lookup)", n.Type, id, o.Processor.Name)
	if _, err := flagForReview(ctx, o.DB, n.Reviews().Unfenced, id, detail); err != nil {
		return err
	}
	trace.SpanFromContext(ctx).AddEvent("past the deadline with no fence: flagged for review")
	return nil
}

// recorded is the state a first phase recorded on an operation of tenant,
// and the transaction it did so in: the finish phase that follows in the same
// transaction knows the event's type before it reads the operation, and fans
// the event out with that read (finishPhase).
type recorded struct {
	tx     *database.Tx
	tenant string
	state  State
}

// record queues in tx the write of a definite outcome of operation id of
// tenant, learned by path, in the state of k's it means: it goes with the
// phase's next statement. A non-nil r notes it. An outcome in a state k
// does not declare is an error, and writes nothing.
func (r *recorded) record(tx *database.Tx, k Kind, id, tenant string, out Outcome, path string) error {
	st, err := stateFor(k, out)
	if err != nil {
		return err
	}
	out.Status = st.Status
	b := &pgx.Batch{}
	queueRecord(b, k.Names(), id, st.Status, out, path)
	tx.Queue(b)
	if r != nil {
		*r = recorded{tx: tx, tenant: tenant, state: st}
	}
	return nil
}

// giveUp closes the operation's downstream key at the processor, the fence,
// and returns what the close reports: the operation, if one was made before
// the close (the close waits for one in flight), else the given-up outcome.
func (o *Runner) giveUp(ctx context.Context, k Kind, p Pending, key string) (outcome, error) {
	span := trace.SpanFromContext(ctx)
	span.AddEvent("fence: closing the downstream key", trace.WithAttributes(attribute.String("downstream_key", key)))
	out, made, err := p.Close(ctx)
	switch {
	case err != nil:
		return outcome{}, fmt.Errorf("close %s: %w", key, err)
	case made:
		span.AddEvent("fence closed: the operation was made first", trace.WithAttributes(attribute.String("processor_id", out.ID)))
		return outcome{Outcome: out}, nil
	}
	span.AddEvent("fence closed: nothing was made, giving up")
	return outcome{Outcome: k.Names().GaveUp(), gaveUp: true}, nil
}

// finishPhase stores the final response, stages the event that follows it
// and clears the reconciliation mark. When r says that the phase before it
// recorded the outcome in this transaction, the event's type is known before
// the operation is read, and the Subscribers' writes go with that read: the
// worker's transaction is two round trips, the read's and the COMMIT's (the
// deliveries' reference to their event is checked at the COMMIT).
func (o *Runner) finishPhase(k Kind, id string, r *recorded) idempotency.Phase {
	return idempotency.Phase{Commit: func(ctx context.Context, tx *database.Tx, key idempotency.Key) (idempotency.Next, error) {
		n := k.Names()
		eventID := NewID("evt_")
		var notified func(context.Context) error
		if r != nil && r.tx == tx && o.Subscribers != nil {
			notified = o.Subscribers.Notify(tx, r.tenant, eventID, r.state.Event)
		}
		final, err := k.Final(ctx, tx, id)
		if err != nil {
			return idempotency.Next{}, fmt.Errorf("read %s %s: %w", n.Type, id, err)
		}
		if final.Status == StatusProcessing {
			return idempotency.Next{}, fmt.Errorf("%s %s has no outcome to finish with", n.Type, id)
		}
		st, err := StateOf(k, final.Status)
		if err != nil {
			return idempotency.Next{}, fmt.Errorf("finish %s %s: %w", n.Type, id, err)
		}
		if notified != nil && (st != r.state || final.TenantID != r.tenant) {
			return idempotency.Next{}, fmt.Errorf("%s %s reads %s of %s, not the %s of %s just recorded", n.Type, id, final.Status, final.TenantID, r.state.Status, r.tenant)
		}
		if err := o.settle(ctx, tx, n.Type, id, st, final, eventID, key, notified); err != nil {
			return idempotency.Next{}, err
		}
		return idempotency.Finish(final.Response), nil
	}}
}

// stageEvent stages an event about resource $4 under key $7, and, when $8,
// clears that resource's reconciliation mark of type $6, if any, in one
// statement: a finished operation's event settles it; an event about its
// parent leaves the parent's mark alone. The event names the request that
// reserved the key, and the key, as the key's row has them (the phase may
// hold no more than its id). An event about the parent is created at the
// clock's time, later in the transaction than its operation's own, which
// it follows in the lists.
const stageEvent = `
WITH settled AS (DELETE FROM reconciliations WHERE $8 AND resource_type = $6 AND resource_id = $4)
INSERT INTO events (id, tenant_id, type, resource_id, data, request_id, request_idempotency_key, created_at)
SELECT $1, $2, $3, $4, $5, k.request_id, k.key, CASE WHEN $8 THEN now() ELSE clock_timestamp() END
FROM (VALUES (1)) AS always_one_row LEFT JOIN idempotency_keys k ON k.id = $7`

// settle writes, in the finishing transaction tx, the immutable event
// eventID of state st about final, operation resourceID of resourceType
// finished under key, clears the operation's reconciliation mark, and has
// the Subscribers finish what they write: notified, when they were told of
// the event before (finishPhase), else they are told now. A state that
// stages an event about the operation's parent (State.Parent) stages it
// next, about final.Parent, under the same key. The inserts are queued: each
// goes with the Subscribers' next statement, or with the COMMIT.
func (o *Runner) settle(ctx context.Context, tx *database.Tx, resourceType, resourceID string, st State, final Final, eventID string, key idempotency.Key, notified func(context.Context) error) error {
	if err := o.stage(ctx, tx, resourceType, resourceID, eventID, st.Event, final.TenantID, final.Object, key, notified); err != nil {
		return err
	}
	if st.Parent == "" {
		return nil
	}
	if final.Parent == nil {
		return fmt.Errorf("%s %s: state %s stages %s, but its Final read no parent", resourceType, resourceID, st.Status, st.Parent)
	}
	return o.stage(ctx, tx, "", final.Parent.ID, NewID("evt_"), st.Parent, final.TenantID, final.Parent.Object, key, nil)
}

// stage queues the insert of one event about resourceID (of resourceType,
// whose reconciliation mark it clears; "" for none) in tx, and has the
// Subscribers finish what they write for it.
func (o *Runner) stage(ctx context.Context, tx *database.Tx, resourceType, resourceID, eventID, eventType, tenantID string, object any, key idempotency.Key, notified func(context.Context) error) error {
	data, err := json.Marshal(object)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(stageEvent, eventID, tenantID, eventType, resourceID, data, resourceType, key.ID, resourceType != "")
	tx.Queue(b)
	if o.Subscribers == nil {
		return nil
	}
	if notified == nil {
		notified = o.Subscribers.Notify(tx, tenantID, eventID, eventType)
	}
	return notified(ctx)
}

// Subscribers hear of each event in the transaction that stages it, so that
// what they write (the deliveries of the tenant's webhook endpoints, and
// their jobs: package endpoints) exists exactly when the event does.
type Subscribers interface {
	// Notify queues in tx what the event's subscribers write, to go with
	// tx's next statement, which may come before the event's own insert (the
	// references to the event are checked at the COMMIT). The function it
	// returns writes what depends on that statement's results (the
	// deliveries' jobs), sending what is still queued first; it must be
	// called before the COMMIT.
	Notify(tx *database.Tx, tenantID, eventID, eventType string) func(context.Context) error
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
