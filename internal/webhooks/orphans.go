package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OrphanLookInterval is how often every worker looks for pending
// deliveries whose job is gone: those of the jobs the queue abandoned since
// its last look (RejobAbandoned), however many deliveries are pending, and
// a page of the pending deliveries (RejobOrphans), for a job gone without a
// trace (deleted by hand).
const OrphanLookInterval = 10 * time.Second

// orphanPage bounds how many pending deliveries one look reads.
const orphanPage = 1000

// orphanCursor is where the next look at the pending deliveries starts: the
// last one looked at, in the order of the pending deliveries' index.
type orphanCursor struct {
	created time.Time
	id      int64
}

// pendingAfter lists the pending deliveries after the cursor ($1, $2) that
// are not in line (a delivery in line has no job until it is handed a
// place), with their job and the time they were created.
const pendingAfter = `
SELECT d.id, d.job, d.created_at FROM webhook_deliveries d
WHERE d.status = 'pending' AND d.created_at >= $1 AND (d.created_at, d.id) > ($1, $2) AND d.job IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM webhook_line w WHERE w.delivery_id = d.id)
ORDER BY d.created_at, d.id LIMIT $3`

// stillOrphans locks the deliveries among ($1, $2) whose job is still the
// one found gone, still pending and not in line: one whose job changed
// since (handed a place, given back) has a job again.
const stillOrphans = `
SELECT d.id FROM webhook_deliveries d JOIN unnest($1::bigint[], $2::bigint[]) AS j (id, job) ON d.id = j.id AND d.job = j.job
WHERE d.status = 'pending' AND NOT EXISTS (SELECT 1 FROM webhook_line w WHERE w.delivery_id = d.id)
FOR UPDATE OF d SKIP LOCKED`

// RejobOrphans gives a new job to each pending delivery, among a page after
// cursor, whose job the queue will never run (discarded after its
// attempts, cancelled by hand in River's dashboard): without one it would
// stay pending for ever, since a resend takes only a delivery that is over.
// The new job attempts it at once, on the schedule from there. It returns
// where the next look starts (the beginning, after the last page) and how
// many it gave a job.
func (d *Deliverer) RejobOrphans(ctx context.Context, cursor orphanCursor) (orphanCursor, int, error) {
	rows, _ := d.DB.Query(ctx, pendingAfter, cursor.created, cursor.id, orphanPage)
	type pending struct {
		id, job int64
		created time.Time
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pending, error) {
		var p pending
		return p, row.Scan(&p.id, &p.job, &p.created)
	})
	if err != nil {
		return cursor, 0, fmt.Errorf("list pending deliveries: %w", err)
	}
	next := orphanCursor{}
	if len(page) == orphanPage {
		last := page[len(page)-1]
		next = orphanCursor{created: last.created, id: last.id}
	}
	jobIDs := make([]int64, len(page))
	for i, p := range page {
		jobIDs[i] = p.job
	}
	unfinished, err := d.Jobs.Unfinished(ctx, jobIDs)
	if err != nil {
		return cursor, 0, err
	}
	var ids, jobs []int64
	for _, p := range page {
		if !unfinished[p.job] {
			ids, jobs = append(ids, p.id), append(jobs, p.job)
		}
	}
	rejobbed, err := d.rejob(ctx, ids, jobs)
	if err != nil {
		return cursor, 0, err
	}
	return next, rejobbed, nil
}

// abandonedPages bounds the pages of abandoned jobs one look reads.
const abandonedPages = 10

// RejobAbandoned gives a new job to each pending delivery whose job the
// queue abandoned (discarded, cancelled) after cursor, reading at most
// abandonedPages pages of such jobs: a look reads what was abandoned since
// the last one, not the pending deliveries, so a delivery is given a new
// job within a look however many are pending. It returns where the next
// look starts and how many it gave a job.
func (d *Deliverer) RejobAbandoned(ctx context.Context, cursor string) (string, int, error) {
	total := 0
	for range abandonedPages {
		ids, jobs, next, err := d.Jobs.Abandoned(ctx, cursor)
		if err != nil {
			return cursor, total, fmt.Errorf("list abandoned delivery jobs: %w", err)
		}
		n, err := d.rejob(ctx, ids, jobs)
		if err != nil {
			return cursor, total, err
		}
		total += n
		if next == cursor {
			break // none since
		}
		cursor = next
	}
	return cursor, total, nil
}

// rejob gives a new job to each delivery of ids whose job is still the one
// of jobs found gone, and says how many.
func (d *Deliverer) rejob(ctx context.Context, ids, jobs []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var rejobbed []int64
	err := pgx.BeginFunc(ctx, d.DB, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, stillOrphans, ids, jobs)
		var err error
		if rejobbed, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		return enqueue(ctx, d.Jobs, tx, rejobbed...)
	})
	if err != nil {
		return 0, fmt.Errorf("give orphaned deliveries a job: %w", err)
	}
	return len(rejobbed), nil
}
