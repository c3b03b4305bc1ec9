package operation

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// LiveJobs tells which of the jobs that drive operations will still run
// soon: waiting to run, or running. A job whose worker died mid-run, which
// the job queue would rescue and run again only later, is not live once it
// has run for longer than any live one can. The job queue implements it.
type LiveJobs interface {
	// Live reports the live jobs among jobIDs, as of now (the database's
	// clock).
	Live(ctx context.Context, jobIDs []int64, now time.Time) (map[int64]bool, error)
}

// Sweeper finds operations that nothing is driving any more: their key is
// unfinished and has been quiet for StuckAfter (database clock), and their
// job will not run again. It hands them to the reconciler, so no operation
// waits for a client's retry to make progress.
type Sweeper struct {
	DB   database.DBTX
	Jobs LiveJobs
	// StuckAfter is how long an unfinished key may stay quiet; it must
	// exceed the job timeout.
	StuckAfter time.Duration
	// BatchSize bounds how many quiet keys one sweep looks at.
	BatchSize int
}

// quietKeys lists operations whose key is unfinished and quiet, and not yet
// marked, oldest first, with the job that drives each (every key whose first
// phase staged a job names it) and the database's clock.
const quietKeys = `
SELECT k.resource_type, k.resource_id, k.job_id, now() FROM idempotency_keys k
WHERE k.recovery_point NOT IN ('finished', 'expired')
	AND k.updated_at < now() - $1::interval
	AND k.job_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM reconciliations m
		WHERE m.resource_type = k.resource_type AND m.resource_id = k.resource_id)
ORDER BY k.updated_at
LIMIT $2`

// quiet is an operation whose key is quiet, and its job.
type quiet struct {
	kind, id string
	jobID    int64
}

// Sweep marks stuck operations for reconciliation and returns how many.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	rows, err := s.DB.Query(ctx, quietKeys, s.StuckAfter, s.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("sweep quiet keys: %w", err)
	}
	var now time.Time // the database's
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (quiet, error) {
		var q quiet
		return q, row.Scan(&q.kind, &q.id, &q.jobID, &now)
	})
	if err != nil {
		return 0, fmt.Errorf("sweep quiet keys: %w", err)
	}
	jobIDs := make([]int64, len(ops))
	for i, op := range ops {
		jobIDs[i] = op.jobID
	}
	live, err := s.Jobs.Live(ctx, jobIDs, now)
	if err != nil {
		return 0, fmt.Errorf("sweep: find live jobs: %w", err)
	}
	marked := 0
	for _, op := range ops {
		if live[op.jobID] {
			continue
		}
		if err := MarkForReconciliation(ctx, s.DB, op.kind, op.id); err != nil {
			return marked, err
		}
		marked++
	}
	return marked, nil
}

// backlog reads the oldest operation whose key is not finished: one that is
// still processing, since an operation's outcome and its key's end commit
// together, whether its job is in the queue or still staged in the outbox.
const backlog = `
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0),
	(SELECT count(*) FROM reconciliations)
FROM idempotency_keys
WHERE recovery_point NOT IN ('finished', 'expired')
	AND (job_id IS NOT NULL OR id IN (SELECT key_id FROM operation_outbox))`

// Backlog reads what is not settled yet: the age of the oldest operation
// still processing (zero when none), by the database's clock, and how many
// operations wait for the reconciler.
func Backlog(ctx context.Context, db database.DBTX) (oldest time.Duration, marked int, err error) {
	var seconds float64
	if err := db.QueryRow(ctx, backlog).Scan(&seconds, &marked); err != nil {
		return 0, 0, fmt.Errorf("backlog: %w", err)
	}
	return time.Duration(seconds * float64(time.Second)), marked, nil
}
