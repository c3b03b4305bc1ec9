package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// nextInLine picks, for tenant $1, the delivery in line that a place goes
// to: the head of the line of the tenant's endpoint that holds the fewest
// places among those with a line and fewer than their share ($2), place $3
// (the attempt handing its own on; 0 for none) not counted; between
// endpoints holding as many, the head that has waited longest. The tenant's
// places so split evenly among its endpoints with work: busy endpoints
// with long lines cannot keep every place cycling between them while
// another endpoint's deliveries wait, and a healthy endpoint is sent to as
// fast as it answers. A tenant has at most 16 endpoints, so the pick reads
// 16 counts and 16 heads by index, however long the lines. It runs under
// the tenant's lock, as every change of the counts does.
const nextInLine = `heads AS (
	SELECT h.delivery_id, h.endpoint_id, h.since, n.held FROM webhook_endpoints e
	CROSS JOIN LATERAL (
		SELECT count(*) AS held FROM webhook_places s WHERE s.endpoint_id = e.id AND s.delivery_id <> $3) n
	CROSS JOIN LATERAL (
		SELECT w.delivery_id, w.endpoint_id, w.since FROM webhook_line w
		WHERE w.endpoint_id = e.id ORDER BY w.since LIMIT 1) h
	WHERE e.tenant_id = $1 AND n.held < $2),
next AS (
	SELECT w.delivery_id, w.endpoint_id FROM webhook_line w
	WHERE w.delivery_id = (SELECT delivery_id FROM heads ORDER BY held, since LIMIT 1)
	FOR UPDATE SKIP LOCKED)`

// handOn hands the place of attempt $3, held by worker $5 (claimAttempt), to the next in
// line (nextInLine) and moves it to that delivery's endpoint; the tenant's
// count does not change. The place moves first, so that a delivery leaves
// the line only when it has one. A place handed on has no worker until its
// delivery's job claims it. No row when nobody in line may take it, or the
// attempt holds no place any more: past its until (purged), or given back
// to its delivery for another job while the worker's presence was lost
// (revivePlaces), which that job's attempt holds now.
const handOn = `
WITH ` + nextInLine + `,
moved AS (
	UPDATE webhook_places s SET delivery_id = next.delivery_id, endpoint_id = next.endpoint_id,
		until = now() + $4::interval, worker = NULL
	FROM next WHERE s.delivery_id = $3 AND s.worker IS NOT DISTINCT FROM nullif($5::integer, 0)
	RETURNING s.delivery_id)
DELETE FROM webhook_line w USING moved WHERE w.delivery_id = moved.delivery_id
RETURNING w.delivery_id`

// handFree gives a free place of tenant $1, when it holds fewer than its
// share ($5), to the next in line (nextInLine), and returns it; no row when
// there is none. It runs under the tenant's lock, after purgePlaces, one
// place a statement so that each sees the last.
const handFree = `
WITH ` + nextInLine + `,
taken AS (
	INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until)
	SELECT delivery_id, endpoint_id, $1, now() + $4::interval FROM next
	WHERE (SELECT count(*) FROM webhook_places WHERE tenant_id = $1) < $5
	ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = NULL
	RETURNING delivery_id)
DELETE FROM webhook_line w USING taken WHERE w.delivery_id = taken.delivery_id
RETURNING w.delivery_id`

// SweepLineInterval is how often every worker sweeps the lines
// (SweepLines): a second, so that a line whose places all died waits
// little longer than they count; a sweep with no line is one read.
const SweepLineInterval = time.Second

// SweepLines runs SweepLine every interval, and RejobAbandoned and
// RejobOrphans every OrphanLookInterval, until ctx ends. Every worker runs it, not River's
// leader alone, so that neither a dead leader's term nor a new leader's
// election holds a line up: sweeps of several workers may overlap, each
// tenant's taken under its lock, and each orphan's under its row's.
func (d *Deliverer) SweepLines(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var (
		orphans   orphanCursor
		abandoned string
	)
	looked := time.Now()
	for {
		handed, err := d.SweepLine(ctx)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "sweep the webhook lines", "err", err)
		}
		if handed > 0 {
			logger.InfoContext(ctx, "webhook places handed to deliveries in line, or back to a dead worker's", "handed", handed)
		}
		if time.Since(looked) >= OrphanLookInterval {
			looked = time.Now()
			var rejobbed, also int
			abandoned, rejobbed, err = d.RejobAbandoned(ctx, abandoned)
			if err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, "look for deliveries whose job was abandoned", "err", err)
			}
			orphans, also, err = d.RejobOrphans(ctx, orphans)
			if err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, "look for pending deliveries without a job", "err", err)
			}
			rejobbed += also
			if rejobbed > 0 {
				logger.WarnContext(ctx, "pending deliveries whose job was gone given a new one", "deliveries", rejobbed)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// linesWaiting lists the tenants with deliveries in line, or with a place
// whose worker's presence ($1 its class) is gone: a dead worker's attempt
// to revive (revivePlaces).
const linesWaiting = `
SELECT tenant_id FROM webhook_line
UNION
SELECT tenant_id FROM webhook_places WHERE worker IS NOT NULL AND pg_try_advisory_xact_lock($1, worker)`

// SweepLine gives the places of dead workers' attempts back to their
// deliveries with a new job each (revivePlaces), and hands the free places
// of every tenant with deliveries in line, those a dead worker left among
// them (purgePlaces), to the next in line (handFree), and inserts their
// jobs: the backstop of passOn, which hands on only the places of attempts
// that end. Every worker runs it (SweepLines). It returns how many places
// it handed or gave back.
func (d *Deliverer) SweepLine(ctx context.Context) (int, error) {
	rows, _ := d.DB.Query(ctx, linesWaiting, database.PresenceClass)
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list the lines: %w", err)
	}
	handed := 0
	for _, tenant := range tenants {
		var ids []int64
		err := pgx.BeginFunc(ctx, d.DB, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockTenantPlaces, tenant); err != nil {
				return err
			}
			rows, _ := tx.Query(ctx, revivePlaces, tenant, database.PresenceClass, PlaceHeld)
			revived, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			ids = revived
			if _, err := tx.Exec(ctx, purgePlaces, tenant, database.PresenceClass); err != nil {
				return err
			}
			for {
				var id int64
				err := tx.QueryRow(ctx, handFree, tenant, d.EndpointInFlight, 0, PlaceHeld, d.TenantInFlight).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return enqueue(ctx, d.Jobs, tx, ids...)
				}
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
		})
		if err != nil {
			return handed, fmt.Errorf("sweep the line of tenant %s: %w", tenant, err)
		}
		handed += len(ids)
	}
	return handed, nil
}

// releaseSlot gives up the place of attempt $1, held by worker $2, among
// those in flight, while it holds it (handOn).
const releaseSlot = `
DELETE FROM webhook_places WHERE delivery_id = $1 AND worker IS NOT DISTINCT FROM nullif($2::integer, 0)`

// passOn hands a's place, under its tenant's lock, to the next delivery in
// line (handOn), whichever endpoint it is for, and inserts that delivery's
// job; or releases the place when nobody waits who could take it. The lock
// and the hand-on go with what tx has queued; the release is queued, to go
// with the COMMIT.
func (d *Deliverer) passOn(ctx context.Context, tx *database.Tx, a attempt) error {
	lock := &pgx.Batch{}
	lock.Queue(lockTenantPlaces, a.tenantID)
	tx.Queue(lock)
	var next int64
	err := tx.QueryRow(ctx, handOn, a.tenantID, d.EndpointInFlight, a.id, PlaceHeld, a.worker).Scan(&next)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		release := &pgx.Batch{}
		release.Queue(releaseSlot, a.id, a.worker)
		tx.Queue(release)
		return nil
	case err != nil:
		return fmt.Errorf("hand the place on: %w", err)
	}
	if err := enqueue(ctx, d.Jobs, tx, next); err != nil {
		return fmt.Errorf("hand the place on: %w", err)
	}
	return nil
}
