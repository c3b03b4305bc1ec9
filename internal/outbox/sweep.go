package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/example/payments/internal/database"
)

// Sweeper finds payments that nothing is driving any more: their key is
// unfinished and quiet, and no live job exists for them (a job whose worker
// died mid-run looks running until River rescues it, so a running job counts
// only while it is younger than StuckAfter). It hands them to the reconciler,
// so no payment waits for a client's retry to make progress.
type Sweeper struct {
	DB  database.DBTX
	Now func() time.Time
	// StuckAfter is how long an unfinished key may stay quiet; it must
	// exceed the job timeout.
	StuckAfter time.Duration
}

const sweepStuck = `
UPDATE payments p SET reconcile_since = $1
FROM idempotency_keys k
WHERE k.id = p.idempotency_key_id
	AND k.recovery_point <> 'finished'
	AND k.updated_at < $2
	AND p.reconcile_since IS NULL
	AND NOT EXISTS (
		SELECT 1 FROM river_job j
		WHERE j.kind = 'charge_payment' AND j.args->>'payment_id' = p.id
			AND (j.state IN ('available', 'pending', 'scheduled', 'retryable')
				OR (j.state = 'running' AND j.attempted_at >= $2)))`

// Sweep marks stuck payments for reconciliation and returns how many.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	now := s.Now().UTC()
	tag, err := s.DB.Exec(ctx, sweepStuck, now, now.Add(-s.StuckAfter))
	if err != nil {
		return 0, fmt.Errorf("sweep stuck payments: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
