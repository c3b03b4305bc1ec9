package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
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
type Phase struct {
	Call   func(ctx context.Context, key Key) error
	Commit func(ctx context.Context, tx pgx.Tx, key Key) (Next, error)
}

const advanceKey = `
UPDATE idempotency_keys SET recovery_point = $3, updated_at = now()
WHERE id = $1 AND recovery_point = $2`

const finishKey = `
UPDATE idempotency_keys
SET recovery_point = 'finished', response_status = $3, response_headers = $4, response_body = $5,
	updated_at = now(), finished_at = now(), expires_at = now() + $6::interval
WHERE id = $1 AND recovery_point = $2`

// notifyFinished wakes the requests waiting on the key; Postgres delivers the
// notification only when the transaction commits.
const notifyFinished = `SELECT pg_notify('` + finishedChannel + `', $1::text)`

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
	if phase.Call != nil {
		if err := phase.Call(ctx, key); err != nil {
			return Key{}, false, fmt.Errorf("phase %s: %w", from, err)
		}
	}

	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return Key{}, false, fmt.Errorf("begin phase: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if key, err = s.GetByID(ctx, tx, keyID); err != nil || key.RecoveryPoint != from {
		return key, false, err // moved on while Call ran
	}
	next, err := phase.Commit(ctx, tx, key)
	if err != nil {
		return Key{}, false, fmt.Errorf("phase %s: %w", from, err)
	}

	var moved int64
	if next.response != nil {
		moved, err = s.finish(ctx, tx, keyID, from, *next.response)
	} else {
		moved, err = s.advance(ctx, tx, keyID, from, next.point)
	}
	if err != nil {
		return Key{}, false, err
	}
	if moved == 0 {
		// Another runner moved the key while this phase ran: its result stands.
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			return Key{}, false, fmt.Errorf("rollback: %w", err)
		}
		key, err := s.GetByID(ctx, s.DB, keyID)
		return key, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Key{}, false, fmt.Errorf("commit phase %s: %w", from, err)
	}
	key, err = s.GetByID(ctx, s.DB, keyID)
	return key, true, err
}

// advance moves the key from one recovery point to the next inside tx, and
// reports whether it was still at from.
func (s *Store) advance(ctx context.Context, tx pgx.Tx, keyID int64, from, to string) (int64, error) {
	tag, err := tx.Exec(ctx, advanceKey, keyID, from, to)
	if err != nil {
		return 0, fmt.Errorf("advance key: %w", err)
	}
	return tag.RowsAffected(), nil
}

// finish stores the final response inside tx and wakes the waiters when tx
// commits; it reports whether the key was still at from.
func (s *Store) finish(ctx context.Context, tx pgx.Tx, keyID int64, from string, resp Response) (int64, error) {
	if s.Retention <= 0 {
		// A key finished with no retention could be reaped at once.
		return 0, errors.New("finish key: the store has no Retention set")
	}
	header, err := json.Marshal(resp.Header)
	if err != nil {
		return 0, fmt.Errorf("encode headers: %w", err)
	}
	tag, err := tx.Exec(ctx, finishKey, keyID, from, resp.Status, header, resp.Body, s.Retention)
	if err != nil {
		return 0, fmt.Errorf("finish key: %w", err)
	}
	if _, err := tx.Exec(ctx, notifyFinished, strconv.FormatInt(keyID, 10)); err != nil {
		return 0, fmt.Errorf("notify finished: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Phases maps each recovery point of an operation, other than finished, to
// the phase that moves the key on from it.
type Phases map[string]Phase

// Drive runs the operation's phases from wherever its key stands until it is
// finished. A phase that fails stops the drive; running Drive again resumes
// from the recovery point that was reached. It reports whether this drive's
// commit is the one that finished the key; false means another runner (a
// retry, the reconciler) finished it, which exactly one runner does.
func (s *Store) Drive(ctx context.Context, keyID int64, phases Phases) (bool, error) {
	key, err := s.GetByID(ctx, s.DB, keyID)
	finished := false
	for err == nil && !key.Finished() && !key.Expired() {
		phase, ok := phases[key.RecoveryPoint]
		if !ok {
			return false, fmt.Errorf("key %d: no phase for recovery point %q", keyID, key.RecoveryPoint)
		}
		var moved bool
		key, moved, err = s.RunPhase(ctx, keyID, key.RecoveryPoint, phase)
		finished = moved && key.Finished()
	}
	return finished, err
}
