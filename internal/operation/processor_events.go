package operation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// ProcessorEvent is a processor's webhook about one operation, verified and
// read by the adapter of that processor (package gateway): what happened
// under a downstream key. A real processor's webhooks are the most reliable
// source of an operation's final status; the worker's call and the
// reconciler's lookups settle what a webhook does not.
type ProcessorEvent struct {
	// ID is the event's id, the same on every delivery of it (webhook-id).
	ID   string
	Type string
	// DownstreamKey is the idempotency key the operation was made with.
	DownstreamKey string
	// Outcome is what the event says happened.
	Outcome Outcome
	Amount  int64
	// Currency is empty when the processor names none.
	Currency string
	// Payload is the event as received, kept for review.
	Payload []byte
}

var (
	// ErrEventMalformed reports a processor event, correctly signed, that
	// cannot be read as an event about an operation.
	ErrEventMalformed = errors.New("processor event malformed")
	// ErrEventNotHandled reports a processor event of a type that settles
	// nothing here: acknowledged, and not recorded.
	ErrEventNotHandled = errors.New("processor event type not handled")
)

// What receiving a processor event found, as ReceiveProcessorEvent reports
// it.
const (
	// EventAccepted is an event recorded, with the job that will settle its
	// operation.
	EventAccepted = "accepted"
	// EventDuplicate is an event recorded before: nothing changed.
	EventDuplicate = "duplicate"
	// EventUnknownOperation is an event recorded and sent to review: it names
	// no operation of this service.
	EventUnknownOperation = "unknown_operation"
)

// What processing a processor event found, as SettleFromEvent reports it
// and processor_events.result stores it.
const (
	// EventSettled is an event that settled its operation.
	EventSettled = "settled"
	// EventAgreed is an event about an operation another path had settled,
	// with the same outcome.
	EventAgreed = "agreed"
	// EventContradiction is an event that contradicts the operation (its
	// outcome, amount or currency), sent to review.
	EventContradiction = "contradiction"
)

// EventResults lists what processing an event may find, for metrics that
// start at zero.
var EventResults = []string{EventSettled, EventAgreed, EventContradiction}

// recordProcessorEvent records an event once: a second delivery of it,
// even one racing the first, finds the primary key taken (waiting for the
// first to commit or roll back) and inserts nothing.
const recordProcessorEvent = `
INSERT INTO processor_events (id, type, downstream_key, resource_type, resource_id, processor_object_id,
	succeeded, status, failure_code, failure_message, amount, currency, payload, result, processed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, CASE WHEN $14::text IS NULL THEN NULL ELSE now() END)
ON CONFLICT (id) DO NOTHING`

// checkViolation is the SQLSTATE of a row a CHECK constraint refuses.
const checkViolation = "23514"

// ReceiveProcessorEvent records a verified processor event durably, in one
// transaction with the job that will settle the operation it names, and
// reports EventAccepted; a delivery of an event already recorded changes
// nothing (EventDuplicate). An event naming no operation of this service
// is recorded and sent to the needs-review queue (EventUnknownOperation).
// Once it returns, the delivery can be answered 2xx.
func (s *Service) ReceiveProcessorEvent(ctx context.Context, ev ProcessorEvent) (string, error) {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit

	var resourceType string
	k, id, known := s.Kinds.ByDownstreamKey(ev.DownstreamKey)
	if known {
		resourceType = k.Names().Type
		_, err := loadRow(ctx, tx, k, id, 0)
		switch {
		case errors.Is(err, ErrNotFound):
			known = false
		case err != nil:
			return "", fmt.Errorf("find the operation of %s: %w", ev.DownstreamKey, err)
		}
		if _, err := stateFor(k, ev.Outcome); err != nil {
			return "", fmt.Errorf("%w: %w", ErrEventMalformed, err)
		}
	}
	var result *string
	if !known {
		resourceType, id = "", ""
		result = Nullable(EventUnknownOperation)
	}
	tag, err := tx.Exec(ctx, recordProcessorEvent, ev.ID, ev.Type, ev.DownstreamKey, Nullable(resourceType), Nullable(id),
		Nullable(ev.Outcome.ID), ev.Outcome.Succeeded, Nullable(ev.Outcome.Status), Nullable(ev.Outcome.FailureCode), Nullable(ev.Outcome.FailureMessage),
		ev.Amount, Nullable(ev.Currency), ev.Payload, result)
	switch {
	case database.IsCode(err, checkViolation) || database.IsDataException(err):
		// A value no event of any kind can hold (a status that names no
		// state, a NUL in text): the event's fault, answered as such, so
		// that the processor stops sending it rather than retrying a 500.
		return "", fmt.Errorf("%w: %w", ErrEventMalformed, err)
	case err != nil:
		return "", fmt.Errorf("record processor event: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return EventDuplicate, nil
	}
	received := EventAccepted
	if known {
		if err := s.Jobs.EnqueueProcessorEvent(ctx, tx, ev.ID); err != nil {
			return "", err
		}
	} else {
		received = EventUnknownOperation
		detail := fmt.Sprintf("processor event %s (%s) names %s, which is no operation of this service. Event: %s",
			ev.ID, ev.Type, ev.DownstreamKey, ev.Payload)
		if _, err := flagForReview(ctx, tx, ReviewEventUnknownOperation, ev.ID, detail); err != nil {
			return "", err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return received, nil
}

const getProcessorEvent = `
SELECT type, downstream_key, resource_type, resource_id, processor_object_id, succeeded, status, failure_code,
	failure_message, amount, coalesce(currency, ''), payload, result
FROM processor_events WHERE id = $1`

// storedEvent is a recorded processor event, and the operation it names.
type storedEvent struct {
	ProcessorEvent
	resourceType, resourceID *string
	// result is set once the event was processed.
	result *string
}

func getStoredEvent(ctx context.Context, db database.DBTX, id string) (storedEvent, error) {
	var (
		ev                          = storedEvent{ProcessorEvent: ProcessorEvent{ID: id}}
		objectID, status, code, msg *string
	)
	err := db.QueryRow(ctx, getProcessorEvent, id).Scan(&ev.Type, &ev.DownstreamKey, &ev.resourceType, &ev.resourceID,
		&objectID, &ev.Outcome.Succeeded, &status, &code, &msg, &ev.Amount, &ev.Currency, &ev.Payload, &ev.result)
	if err != nil {
		return storedEvent{}, fmt.Errorf("get processor event %s: %w", id, err)
	}
	ev.Outcome.ID, ev.Outcome.Status = deref(objectID), deref(status)
	ev.Outcome.FailureCode, ev.Outcome.FailureMessage = deref(code), deref(msg)
	return ev, nil
}

const markEventProcessed = `
UPDATE processor_events SET result = $2, processed_at = now() WHERE id = $1 AND result IS NULL`

// SettleFromEvent processes the recorded processor event eventID, once:
// it settles the operation the event names through the same conditional
// phase commit as the worker and the reconciler (whichever commits first
// wins; the others find the key moved on), or, when another path settled
// it first, checks that the event agrees with what was recorded. An event
// that contradicts the operation goes to the needs-review queue, with the
// event, and changes nothing else. It reports what it found (EventSettled,
// EventAgreed, EventContradiction).
func (o *Runner) SettleFromEvent(ctx context.Context, eventID string) (string, error) {
	ev, err := getStoredEvent(ctx, o.DB, eventID)
	if err != nil {
		return "", err
	}
	if ev.result != nil {
		return *ev.result, nil // processed already, by an attempt that did not complete its job
	}
	if ev.resourceType == nil || ev.resourceID == nil {
		return "", fmt.Errorf("processor event %s names no operation but was not processed", eventID)
	}
	k, err := o.Kinds.Kind(*ev.resourceType)
	if err != nil {
		return "", err
	}
	id := *ev.resourceID
	p, err := o.load(ctx, k, id)
	if err != nil {
		return "", err
	}
	if p.Recorded == nil && sameTerms(ev.ProcessorEvent, p) {
		r := &recorded{}
		settled, err := o.driveWith(ctx, k, id, p, SettledByWebhook, o.eventPhase(k, id, p.TenantID, ev.ProcessorEvent, r), r)
		if err != nil {
			return "", err
		}
		if settled && *p.RecoveryPoint == idempotency.RecoveryStarted {
			o.observeEvent(EventSettled)
			return EventSettled, nil
		}
		// Another path settled it first: what did it record?
		if p, err = o.load(ctx, k, id); err != nil {
			return "", err
		}
	}
	if p.Recorded != nil && sameTerms(ev.ProcessorEvent, p) && movesOn(k, *p.Recorded, ev.Outcome) {
		moved, err := o.moveOn(ctx, k, id, *p.Recorded, ev)
		if err != nil {
			return "", err
		}
		if moved {
			o.observeEvent(EventSettled)
			return EventSettled, nil
		}
		// Another answer moved it first: what does it record now?
		if p, err = o.load(ctx, k, id); err != nil {
			return "", err
		}
	}
	result := EventAgreed
	if !sameTerms(ev.ProcessorEvent, p) || p.Recorded == nil || !sameOutcome(ev.Outcome, *p.Recorded) {
		result = EventContradiction
	}
	trace.SpanFromContext(ctx).AddEvent("processor event checked against the settled operation", trace.WithAttributes(
		attribute.String("result", result), attribute.String("resource_type", *ev.resourceType), attribute.String("resource_id", id)))
	if err := o.closeEvent(ctx, ev, p, result); err != nil {
		return "", err
	}
	o.observeEvent(result)
	return result, nil
}

// eventPhase records the outcome an event reports, as the phase that moves
// the operation's key on from started. It makes no call, so the finish
// phase commits in its transaction; so does the event's result.
func (o *Runner) eventPhase(k Kind, id, tenant string, ev ProcessorEvent, r *recorded) idempotency.Phase {
	return idempotency.Phase{Commit: func(ctx context.Context, tx *database.Tx, _ idempotency.Key) (idempotency.Next, error) {
		if err := r.record(tx, k, id, tenant, ev.Outcome, SettledByWebhook); err != nil {
			return idempotency.Next{}, err
		}
		b := &pgx.Batch{}
		b.Queue(markEventProcessed, ev.ID, EventSettled)
		tx.Queue(b)
		return idempotency.AdvanceTo(k.Names().CreatedPoint()), nil
	}}
}

// movesOn reports whether out, the processor's later answer about an
// operation of kind k that recorded outcome recorded, moves it on: it
// waits (its state is one of k's that wait), or it succeeded reversibly and
// out says it failed, and out is about the same processor object and puts
// it in another state.
func movesOn(k Kind, recorded, out Outcome) bool {
	from, err := StateOf(k, recorded.Status)
	if err != nil || !(from.Waiting || from.Reversible) || out.ID != recorded.ID {
		return false
	}
	to, err := stateFor(k, out)
	return err == nil && to.Status != from.Status && (from.Waiting || !to.Succeeded)
}

// lockOperation holds, until its transaction ends, the lock of operation
// $2 of kind $1, under which a waiting operation moves on: two answers of
// the processor never both move it.
const lockOperation = `SELECT pg_advisory_xact_lock(hashtextextended('operation:' || $1 || ':' || $2, 0))`

// moveOn moves operation id of kind k on from its waiting outcome, as ev,
// the processor's later answer, says, in one transaction under the
// operation's lock, while it still records that outcome: the new state's
// outcome recorded (Kind.Record, by the webhook's path), its event staged
// and ev marked settled. The key's final response stays what the first
// answer made it. It reports whether it moved it: not when another answer
// did first.
func (o *Runner) moveOn(ctx context.Context, k Kind, id string, from Outcome, ev storedEvent) (bool, error) {
	n := k.Names()
	tx, err := database.Begin(ctx, o.DB)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	lock := &pgx.Batch{}
	lock.Queue(lockOperation, n.Type, id)
	tx.Queue(lock)
	p, err := loadRow(ctx, tx, k, id, o.Deadline)
	if err != nil {
		return false, fmt.Errorf("load %s %s: %w", n.Type, id, err)
	}
	if p.Status != from.Status {
		return false, nil
	}
	r := &recorded{}
	if err := r.record(tx, k, id, p.TenantID, ev.Outcome, SettledByWebhook); err != nil {
		return false, err
	}
	final, err := k.Final(ctx, tx, id)
	if err != nil {
		return false, fmt.Errorf("read %s %s: %w", n.Type, id, err)
	}
	var key idempotency.Key
	if p.KeyID != nil {
		key.ID = *p.KeyID
	}
	if err := o.settle(ctx, tx, n.Type, id, r.state, final, NewID("evt_"), key, nil); err != nil {
		return false, err
	}
	done := &pgx.Batch{}
	done.Queue(markEventProcessed, ev.ID, EventSettled)
	if err := tx.CommitWith(ctx, done); err != nil {
		return false, fmt.Errorf("move %s %s on: %w", n.Type, id, err)
	}
	return true, nil
}

// closeEvent stores the result of an event that did not settle its
// operation and, for a contradiction, opens a review case with the event.
func (o *Runner) closeEvent(ctx context.Context, ev storedEvent, p Pending, result string) error {
	tx, err := o.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if result == EventContradiction {
		recorded := "no outcome yet"
		if p.Recorded != nil {
			recorded = describeOutcome(*p.Recorded)
		}
		detail := fmt.Sprintf("processor event %s (%s) about %s %s says %s for %d %s; the operation is for %d %s and records %s. Event: %s",
			ev.ID, ev.Type, *ev.resourceType, *ev.resourceID, describeOutcome(ev.Outcome), ev.Amount, ev.Currency,
			p.Amount, p.Currency, recorded, ev.Payload)
		if _, err := flagForReview(ctx, tx, ReviewEventContradiction, ev.ID, detail); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, markEventProcessed, ev.ID, result); err != nil {
		return fmt.Errorf("mark processor event: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (o *Runner) observeEvent(result string) {
	if o.Observer != nil {
		o.Observer.ProcessorEvent(result)
	}
}

// sameTerms reports whether an event is about what the operation asked
// for: its amount, and its currency when the event names one.
func sameTerms(ev ProcessorEvent, p Pending) bool {
	return ev.Amount == p.Amount && (ev.Currency == "" || strings.EqualFold(ev.Currency, p.Currency))
}

// sameOutcome reports whether two outcomes of one operation agree: both
// made the same processor object, or both made nothing, and both
// succeeded or both did not.
func sameOutcome(a, b Outcome) bool {
	return a.Succeeded == b.Succeeded && a.ID == b.ID
}

// describeOutcome says an outcome in a few words, for review cases.
func describeOutcome(out Outcome) string {
	made := "nothing made"
	if out.ID != "" {
		made = out.ID
	}
	if out.Succeeded {
		return "succeeded (" + made + ")"
	}
	return "failed " + out.FailureCode + " (" + made + ")"
}

const pruneProcessorEvents = `
DELETE FROM processor_events WHERE id IN (
	SELECT id FROM processor_events
	WHERE result IS NOT NULL AND received_at < now() - $2::interval
	ORDER BY received_at
	LIMIT $1)`

// PruneProcessorEvents deletes the processed processor events received more
// than retention ago (by the database's clock), batch at a time, and returns
// how many it deleted. Keeping them longer than the processor retries makes
// a late delivery a duplicate; a delivery of a pruned event would be
// recorded and processed again, which changes nothing either: its operation
// is settled, and the event only agrees or goes to review once more.
func (o *Runner) PruneProcessorEvents(ctx context.Context, retention time.Duration, batch int) (int, error) {
	n, err := database.InBatches(ctx, o.DB, pruneProcessorEvents, batch, retention)
	if err != nil {
		return n, fmt.Errorf("prune processor events: %w", err)
	}
	return n, nil
}

const oldestUnprocessedEvent = `
SELECT coalesce(extract(epoch FROM now() - min(received_at)), 0) FROM processor_events WHERE result IS NULL`

// OldestUnprocessedEvent is the age of the oldest processor event received
// and not processed, by the database's clock; zero when there is none.
func OldestUnprocessedEvent(ctx context.Context, db database.DBTX) (time.Duration, error) {
	return database.Age(ctx, db, oldestUnprocessedEvent)
}
