package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// LiveJobs tells which operations still have a job that will drive them: one
// waiting to run, or running on a worker that is alive. The job queue
// implements it; a job whose worker died mid-run is not live.
type LiveJobs interface {
	Live(ctx context.Context, resourceType string, ids []string) (map[string]bool, error)
}

// Sweeper finds operations that nothing is driving any more: their key is
// unfinished and has been quiet for StuckAfter (database clock), and no live
// job exists for them. It hands them to the reconciler, so no payment or
// refund waits for a client's retry to make progress.
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
// marked, oldest first.
const quietKeys = `
SELECT k.resource_type, k.resource_id FROM idempotency_keys k
WHERE k.recovery_point NOT IN ('finished', 'expired')
	AND k.updated_at < now() - $1::interval
	AND k.resource_type IN ('payment', 'refund')
	AND NOT EXISTS (SELECT 1 FROM reconciliations r
		WHERE r.resource_type = k.resource_type AND r.resource_id = k.resource_id)
ORDER BY k.updated_at
LIMIT $2`

// Sweep marks stuck operations for reconciliation and returns how many.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	rows, err := s.DB.Query(ctx, quietKeys, s.StuckAfter, s.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("sweep quiet keys: %w", err)
	}
	quiet := map[string][]string{}
	var kind, id string
	_, err = pgx.ForEachRow(rows, []any{&kind, &id}, func() error {
		quiet[kind] = append(quiet[kind], id)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep quiet keys: %w", err)
	}
	marked := 0
	for kind, ids := range quiet {
		live, err := s.Jobs.Live(ctx, kind, ids)
		if err != nil {
			return marked, fmt.Errorf("sweep: find live jobs: %w", err)
		}
		for _, id := range ids {
			if live[id] {
				continue
			}
			if err := MarkForReconciliation(ctx, s.DB, kind, id); err != nil {
				return marked, err
			}
			marked++
		}
	}
	return marked, nil
}
