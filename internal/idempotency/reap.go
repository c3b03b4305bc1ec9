package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/timer"
)

// ReapPace paces the reaper beside the service's own writes.
type ReapPace struct {
	// Batch is the most keys one statement reaps (REAP_BATCH).
	Batch int
	// Target, when set, is how long a batch should take (REAP_BATCH_TIME):
	// each stage sizes its next batch from how long its last one took per
	// key, from a tenth of Batch (where it starts) to Batch. Zero: every
	// batch is Batch keys.
	Target time.Duration
	// Pause is how long the reaper rests after each batch, as a multiple of
	// the time the batch took (REAP_REST): 0 reaps flat out; 1 leaves the
	// database to the service at least half of the reaper's time.
	Pause float64
}

// expireKeys turns a batch of finished keys past their retention into
// tombstones: the response goes; the key, its fingerprint and digest and
// what it created stay until the tombstone's own expiry. The batch's keys
// are the first due from the expiry the last batch reached ($3), and it
// returns their expiries, so that the next batch starts past them.
const expireKeys = `
WITH batch AS (
	SELECT id, expires_at FROM idempotency_keys
	WHERE recovery_point = 'finished' AND expires_at < now() AND expires_at >= $3
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED)
UPDATE idempotency_keys k
SET recovery_point = 'expired', response_status = NULL, response_headers = NULL, response_body = NULL,
	locked_at = NULL, updated_at = now(), expires_at = now() + $2::interval
FROM batch
WHERE k.id = batch.id
RETURNING batch.expires_at`

// reapTombstones deletes a batch of tombstones past their expiry, from the
// expiry the last batch reached ($2), as expireKeys.
const reapTombstones = `
WITH batch AS (
	SELECT id, expires_at FROM idempotency_keys
	WHERE recovery_point = 'expired' AND expires_at < now() AND expires_at >= $2
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED)
DELETE FROM idempotency_keys k
USING batch
WHERE k.id = batch.id
RETURNING batch.expires_at`

// Reap turns finished keys past their retention into tombstones and deletes
// tombstones past theirs, at most Batch keys a statement, each statement its
// own transaction; unfinished keys are never touched, and what a key created
// outlives it. It is paced to run beside the service at full throughput
// while it works through a backlog:
//
//   - each batch starts at the expiry where the last one ended, so that it
//     does not scan the index entries of the keys reaped before it, dead
//     until VACUUM, which would make a run's cost grow with the square of its
//     backlog (docs/BENCHMARKS.md, "Retention"). A key skipped because it was
//     locked waits for the next run, which starts from the beginning;
//   - with a Target, each batch takes about Target, whatever the machine and
//     its load;
//   - after each batch it rests Pause times the batch's time, so that the
//     service's commits do not queue their flushes behind the reaper's WAL;
//     the rest is pacing only, as every batch commits on its own;
//   - it takes the two stages in turn, so that a run cut short has made
//     progress on both;
//   - it stops without error when ctx's deadline (the job's timeout) is
//     nearer than twice the longest batch and rest it has seen, so that a
//     run usually ends with every batch committed; a batch the deadline cuts
//     off all the same rolls back whole, uncounted, and the next run carries
//     on.
//
// It returns how many keys it expired and how many tombstones it deleted.
func (s *Store) Reap(ctx context.Context, p ReapPace) (expired, deleted int, err error) {
	if s.TombstoneRetention <= 0 {
		return 0, 0, errors.New("reap keys: the store has no TombstoneRetention set")
	}
	if p.Batch < 1 || p.Pause < 0 || p.Target < 0 {
		return 0, 0, fmt.Errorf("reap keys: batch %d, target %s and pause %g: the batch must be positive, the others not negative",
			p.Batch, p.Target, p.Pause)
	}
	stages := []*reapStage{
		{name: "expire keys", n: &expired, limit: p.least(), run: func(limit int, from time.Time) (pgx.Rows, error) {
			return s.DB.Query(ctx, expireKeys, limit, s.TombstoneRetention, from)
		}},
		{name: "reap tombstones", n: &deleted, limit: p.least(), run: func(limit int, from time.Time) (pgx.Rows, error) {
			return s.DB.Query(ctx, reapTombstones, limit, from)
		}},
	}
	var step time.Duration // the longest batch and its pause so far
	defer func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = nil
		}
	}()
	for left := len(stages); left > 0; {
		for _, st := range stages {
			if st.done {
				continue
			}
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < 2*step {
				return expired, deleted, nil
			}
			start := time.Now()
			if err := st.batch(); err != nil {
				return expired, deleted, err
			}
			took := time.Since(start)
			if st.done {
				left--
			} else {
				st.limit = p.next(st.limit, took)
			}
			pause := time.Duration(float64(took) * p.Pause)
			step = max(step, took+pause)
			if pause > 0 && left > 0 {
				if err := timer.Sleep(ctx, pause); err != nil {
					return expired, deleted, err
				}
			}
		}
	}
	return expired, deleted, nil
}

// least is the size of a stage's first batch, and the least of any: a tenth
// of Batch with a Target, else Batch.
func (p ReapPace) least() int {
	if p.Target > 0 {
		return max(1, p.Batch/10)
	}
	return p.Batch
}

// next is the size of the batch after one of limit keys that took took: with
// a Target, as many keys as that batch's time per key says take Target, from
// least to Batch; else limit again.
func (p ReapPace) next(limit int, took time.Duration) int {
	if p.Target <= 0 {
		return limit
	}
	return max(p.least(), min(p.Batch, int(float64(limit)*float64(p.Target)/float64(max(took, time.Microsecond)))))
}

// reapStage is one of Reap's stages: its statement, run from the latest
// expiry reaped so far, and its count.
type reapStage struct {
	name  string
	run   func(limit int, from time.Time) (pgx.Rows, error)
	n     *int
	limit int
	from  time.Time // the latest expiry reaped so far
	done  bool
}

// batch runs one batch of the stage, of at most limit keys, counts it, and
// moves from past the expiries it reaped; the stage is done when the batch
// found fewer keys than its limit. A batch that fails is not counted.
func (st *reapStage) batch() error {
	rows, err := st.run(st.limit, st.from)
	if err != nil {
		return fmt.Errorf("%s: %w", st.name, err)
	}
	n := 0
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			rows.Close()
			return fmt.Errorf("%s: %w", st.name, err)
		}
		n++
		if at.After(st.from) {
			st.from = at
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", st.name, err)
	}
	*st.n += n
	st.done = n < st.limit
	return nil
}
