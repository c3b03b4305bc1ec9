package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/database"
)

// Next is where a phase leaves its key: at a later recovery point, or
// finished with the response that every replay returns.
type Next struct {
	point    string
	response *Response
}

// AdvanceTo leaves the key at the recovery point named.
func AdvanceTo(point string) Next { return Next{point: point} }

// Finish leaves the key finished with resp as its final response.
func Finish(resp Response) Next { return Next{point: RecoveryFinished, response: &resp} }

// Phase is one atomic phase of an operation.
//
// Call, when set, performs the phase's one foreign side effect, such as a
// processor request. It runs outside any transaction, so that no database
// connection is held across a network call, and it must be idempotent: if the
// phase does not commit, the next run calls again (with the same downstream
// key). Commit then runs in a transaction: it records what Call learned and
// returns where the key goes next. Its writes commit together with that move,
// or not at all.
//
// A phase without Call has no foreign side effect, so Drive commits it in
// the transaction of the phase before it: the key moves past both at once,
// and each phase still commits whole or not at all.
//
// Commit's transaction spends no round trip it can share (database.Tx): its
// writes may be queued (Tx.Queue) to go with its next read or with the move
// of the key and the COMMIT.
type Phase struct {
	Call   func(ctx context.Context, key Key) error
	Commit func(ctx context.Context, tx *database.Tx, key Key) (Next, error)
}

// lockKeyAt locks the key while it is at a recovery point: the phase's
// transaction takes it first, so that once its result is read no other
// runner can move the key before this transaction ends.
const lockKeyAt = `SELECT 1 FROM idempotency_keys WHERE id = $1 AND recovery_point = $2 FOR UPDATE`

// errMoved reports a key that another runner moved on from the point a
// phase started at: the phase's writes are rolled back, and its result stands.
var errMoved = errors.New("another runner moved the key on")

const advanceKey = `
UPDATE idempotency_keys SET recovery_point = $3, updated_at = now()
WHERE id = $1 AND recovery_point = $2
RETURNING ` + keyColumns

const finishKey = `
UPDATE idempotency_keys
SET recovery_point = 'finished', response_status = $3, response_headers = $4, response_body = $5,
	locked_at = NULL, updated_at = now(), finished_at = now(), expires_at = now() + $6::interval
WHERE id = $1 AND recovery_point = $2
RETURNING ` + keyColumns

// RunPhase runs phase when the key is at recovery point from, and commits its
// writes together with the move to the point it returns. A key found at any
// other point is returned as it is, so a job that finds its key past a point
// skips that phase. If another runner moves the key first, this run's writes
// are rolled back. It returns the key as it stands afterwards, and whether
// this run's commit is the one that moved it.
func (s *Store) RunPhase(ctx context.Context, keyID int64, from string, phase Phase) (Key, bool, error) {
	key, err := s.GetByID(ctx, s.DB, keyID)
	if err != nil || key.RecoveryPoint != from {
		return key, false, err
	}
	return s.runPhase(ctx, key, phase, nil)
}

// runPhase runs phase on key, as read at the recovery point the phase moves
// it on from, and then, in the same transaction, each phase of then without
// a Call that follows. The transaction first locks the key where it was
// read, so no second read is needed: if another runner moved it meanwhile,
// the lock finds no row and this run's writes are rolled back; else no other
// runner can move it until this run has.
func (s *Store) runPhase(ctx context.Context, key Key, phase Phase, then Phases) (Key, bool, error) {
	from := key.RecoveryPoint
	if phase.Call != nil {
		if err := phase.Call(ctx, key); err != nil {
			return s.callFailed(ctx, key, err)
		}
	}

	// One transaction for this phase and those without a Call that follow.
	// It locks the key at from first, queued to go with the phases' first
	// read; their writes are queued too; and the move of the key goes with
	// the COMMIT: the payment's worker commits its outcome and finishes the
	// key in two round trips after its read.
	tx, err := s.beginAt(ctx, key)
	if err != nil {
		return Key{}, false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	next, err := commitPhases(ctx, tx, key, phase, then)
	var moved Key
	if err == nil {
		moved, err = s.move(ctx, tx, key.ID, from, next)
	}
	switch {
	case errors.Is(err, errMoved):
		return s.overtaken(ctx, tx, key)
	case err != nil:
		return Key{}, false, err
	}
	s.advanced(ctx, from, moved)
	return moved, true, nil
}

// advanced reports a key this run moved on from point from: an event on the
// span, and, once the key is finished, its announcement (Store.Announcer).
func (s *Store) advanced(ctx context.Context, from string, moved Key) {
	trace.SpanFromContext(ctx).AddEvent("recovery point advanced", trace.WithAttributes(
		attribute.Int64("idempotency.key_id", moved.ID), attribute.String("from", from), attribute.String("to", moved.RecoveryPoint)))
	if moved.Finished() {
		s.Announcer.Finished(moved.ID)
	}
}

// callFailed answers for a phase whose Call failed with err: when another
// runner (a webhook, the reconciler) settled the key while the call was
// out, its failure no longer matters and the key is returned as that runner
// left it; otherwise err, the phase's.
func (s *Store) callFailed(ctx context.Context, key Key, err error) (Key, bool, error) {
	from := key.RecoveryPoint
	if moved, ok := s.movedOn(ctx, key.ID, from); ok {
		trace.SpanFromContext(ctx).AddEvent("recovery point moved by another runner", trace.WithAttributes(
			attribute.Int64("idempotency.key_id", key.ID), attribute.String("from", from),
			attribute.String("to", moved.RecoveryPoint), attribute.String("call_error", err.Error())))
		return moved, false, nil
	}
	return Key{}, false, fmt.Errorf("phase %s: %w", from, err)
}

// beginAt begins the transaction of the phases that move key on, with the
// lock of the key at the point it was read (lockKeyAt) queued to go with its
// first statement: that statement fails with errMoved when another runner
// has moved the key since.
func (s *Store) beginAt(ctx context.Context, key Key) (*database.Tx, error) {
	tx, err := database.Begin(ctx, s.DB)
	if err != nil {
		return nil, fmt.Errorf("begin phase: %w", err)
	}
	lock := &pgx.Batch{}
	lock.Queue(lockKeyAt, key.ID, key.RecoveryPoint).QueryRow(func(row pgx.Row) error {
		var one int
		if err := row.Scan(&one); errors.Is(err, pgx.ErrNoRows) {
			return errMoved
		} else if err != nil {
			return fmt.Errorf("lock key: %w", err)
		}
		return nil
	})
	tx.Queue(lock)
	return tx, nil
}

// commitPhases runs phase's Commit on key in tx, then the Commit of each
// phase of then without a Call that follows, until the key is finished or
// the next phase has a Call, and returns where the last leaves the key.
func commitPhases(ctx context.Context, tx *database.Tx, key Key, phase Phase, then Phases) (Next, error) {
	next, err := phase.Commit(ctx, tx, key)
	if err != nil {
		return next, fmt.Errorf("phase %s: %w", key.RecoveryPoint, err)
	}
	for next.response == nil {
		follow, ok := then[next.point]
		if !ok || follow.Call != nil {
			break
		}
		at := key
		at.RecoveryPoint = next.point
		if next, err = follow.Commit(ctx, tx, at); err != nil {
			return next, fmt.Errorf("phase %s: %w", at.RecoveryPoint, err)
		}
	}
	return next, nil
}

// move moves the key from point from to next, with tx's COMMIT, and returns
// it as moved. CommitWith reads the lock's result before it sends the
// COMMIT: the key is still at from, and this transaction holds it.
func (s *Store) move(ctx context.Context, tx *database.Tx, keyID int64, from string, next Next) (Key, error) {
	var (
		moved Key
		err   error
	)
	b := &pgx.Batch{}
	if next.response != nil {
		err = s.queueFinish(b, keyID, from, *next.response, &moved)
	} else {
		b.Queue(advanceKey, keyID, from, next.point).QueryRow(func(row pgx.Row) (err error) {
			moved, err = scanKey(row)
			return err
		})
	}
	if err == nil {
		err = tx.CommitWith(ctx, b)
	}
	if err != nil {
		return Key{}, fmt.Errorf("move key from %s: %w", from, err)
	}
	return moved, nil
}

// overtaken ends a run whose phase another runner overtook, moving the key
// while it ran: this run's writes are rolled back, the other's result
// stands, and the key is returned as it stands now.
func (s *Store) overtaken(ctx context.Context, tx *database.Tx, key Key) (Key, bool, error) {
	trace.SpanFromContext(ctx).AddEvent("phase rolled back: another runner moved the key", trace.WithAttributes(
		attribute.Int64("idempotency.key_id", key.ID), attribute.String("from", key.RecoveryPoint)))
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return Key{}, false, fmt.Errorf("rollback: %w", err)
	}
	key, err := s.GetByID(ctx, s.DB, key.ID)
	return key, false, err
}

// movedOn reads the key after a phase's call failed, and reports it when
// another runner has moved it on from the point the phase started at. The
// read does not follow ctx, which may be why the call failed.
func (s *Store) movedOn(ctx context.Context, keyID int64, from string) (Key, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	key, err := s.GetByID(ctx, s.DB, keyID)
	return key, err == nil && key.RecoveryPoint != from
}

// queueFinish queues in b the move of the key from point from to finished,
// with resp as its final response and its lock cleared, and the read of the
// key finished into moved. Once b's transaction commits, the caller
// announces it (Store.Announcer).
func (s *Store) queueFinish(b *pgx.Batch, keyID int64, from string, resp Response, moved *Key) error {
	if s.Retention <= 0 {
		// A key finished with no retention could be reaped at once.
		return errors.New("finish key: the store has no Retention set")
	}
	header, err := encodeHeaders(resp.Header)
	if err != nil {
		return err
	}
	b.Queue(finishKey, keyID, from, resp.Status, header, resp.Body, s.Retention).QueryRow(func(row pgx.Row) (err error) {
		*moved, err = scanKey(row)
		return err
	})
	return nil
}

// Phases maps each recovery point of an operation, other than finished, to
// the phase that moves the key on from it.
type Phases map[string]Phase

// DriveFrom runs the operation's phases from point, the recovery point its
// caller has just read (with the operation's own row, say), until the key is
// finished, without reading the key again. A phase that fails stops the
// drive; running it again resumes from the recovery point reached. It
// reports whether this drive's commit is the one that finished the key; false
// means another runner (a retry, the reconciler) finished it, which exactly
// one runner does. A point that moved meanwhile changes nothing: the phase's
// conditional move finds the key gone on, its writes roll back, and the
// drive goes on from where the key is; a phase's Call is idempotent.
func (s *Store) DriveFrom(ctx context.Context, keyID int64, point string, phases Phases) (bool, error) {
	return s.drive(ctx, Key{ID: keyID, RecoveryPoint: point}, phases)
}

func (s *Store) drive(ctx context.Context, key Key, phases Phases) (bool, error) {
	var err error
	finished := false
	for err == nil && !key.Finished() && !key.Expired() {
		phase, ok := phases[key.RecoveryPoint]
		if !ok {
			return false, fmt.Errorf("key %d: no phase for recovery point %q", key.ID, key.RecoveryPoint)
		}
		var moved bool
		key, moved, err = s.runPhase(ctx, key, phase, phases)
		finished = moved && key.Finished()
	}
	return finished, err
}
