package webhooks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// Jobs are the deliveries' jobs, in the job queue.
type Jobs interface {
	// EnqueueDeliveries stages the jobs of deliveries in the transaction
	// that writes them, and returns their IDs, in the order of deliveryIDs.
	EnqueueDeliveries(ctx context.Context, tx pgx.Tx, deliveryIDs ...int64) ([]int64, error)
	// Unfinished reports the jobs among jobIDs that the queue will still
	// run, however late.
	Unfinished(ctx context.Context, jobIDs []int64) (map[int64]bool, error)
	// Abandoned lists the delivery jobs the queue finalized without
	// completing them (discarded after their attempts, cancelled), in the
	// order it finalized them, after cursor ("" for the first it keeps): a
	// page of their deliveries and jobs, and the cursor after its last
	// (cursor itself when the page is empty).
	Abandoned(ctx context.Context, cursor string) (deliveryIDs, jobIDs []int64, next string, err error)
}

// ownJobs makes each job ($2) the one job of its delivery ($1): the only one
// that may make its attempts from now on (claimAttempt).
const ownJobs = `
UPDATE webhook_deliveries d SET job = j.job
FROM unnest($1::bigint[], $2::bigint[]) AS j (id, job) WHERE d.id = j.id`

// enqueue inserts the jobs of deliveries ids in tx, each its delivery's one
// job from now on. A job inserted for a delivery before, whose worker died
// as it ended (in line, or its delivery over) or while it ran, stays running
// until River rescues it: it then finds it is not its delivery's job any
// more and ends, so that no delivery is ever attempted by two jobs at once.
func enqueue(ctx context.Context, jobs Jobs, tx pgx.Tx, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	jobIDs, err := jobs.EnqueueDeliveries(ctx, tx, ids...)
	if err != nil {
		return err
	}
	if err := database.Later(ctx, tx, ownJobs, ids, jobIDs); err != nil {
		return fmt.Errorf("own delivery jobs: %w", err)
	}
	return nil
}
