package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// handOn hands the place of attempt $1, to endpoint $2, to the delivery to
// that endpoint that has waited longest in line, and returns it; no row when
// none waits (or each is being handed a place by another attempt), or the
// attempt holds no place any more (past its until, purged). It needs no
// lock: the place stays with its endpoint and its tenant, and their counts
// do not change. The place moves first, so that a delivery leaves the line
// only when it has one. A place handed on has no worker until its
// delivery's job claims it.
const handOn = `
WITH next AS (
	SELECT delivery_id FROM webhook_waiting WHERE endpoint_id = $2
	ORDER BY since LIMIT 1 FOR UPDATE SKIP LOCKED),
moved AS (
	UPDATE webhook_sending s SET delivery_id = next.delivery_id, until = now() + $3::interval, worker = NULL
	FROM next WHERE s.delivery_id = $1
	RETURNING s.delivery_id)
DELETE FROM webhook_waiting w USING moved WHERE w.delivery_id = moved.delivery_id
RETURNING w.delivery_id`

// handOver is handOn when no delivery to the attempt's endpoint waits: the
// place of attempt $1 goes to the delivery of its tenant $2 that has waited
// longest among those whose endpoint has room under its share ($3), and
// moves to that endpoint. It runs under the tenant's lock, as every change
// of the counts does.
const handOver = `
WITH next AS (
	SELECT w.delivery_id, w.endpoint_id FROM webhook_waiting w
	WHERE w.tenant_id = $2 AND (SELECT count(*) FROM webhook_sending s WHERE s.endpoint_id = w.endpoint_id) < $3
	ORDER BY w.since LIMIT 1 FOR UPDATE SKIP LOCKED),
moved AS (
	UPDATE webhook_sending s SET delivery_id = next.delivery_id, endpoint_id = next.endpoint_id, until = now() + $4::interval,
		worker = NULL
	FROM next WHERE s.delivery_id = $1
	RETURNING s.delivery_id)
DELETE FROM webhook_waiting w USING moved WHERE w.delivery_id = moved.delivery_id
RETURNING w.delivery_id`

// handFree gives a free place of tenant $1 to the delivery that has waited
// longest in line among those whose endpoint ($2) and tenant ($3) have room,
// and returns it; no row when there is none. It runs under the tenant's
// lock, after purgeSlots, one place a statement so that each sees the last.
// The tenant's places are counted once, by endpoint, not once for each
// delivery in a line that may be thousands long.
const handFree = `
WITH held AS (
	SELECT endpoint_id, count(*) AS n FROM webhook_sending WHERE tenant_id = $1 GROUP BY endpoint_id),
next AS (
	SELECT w.delivery_id, w.endpoint_id FROM webhook_waiting w LEFT JOIN held h ON h.endpoint_id = w.endpoint_id
	WHERE w.tenant_id = $1 AND coalesce(h.n, 0) < $2
		AND (SELECT coalesce(sum(n), 0) FROM held) < $3
	ORDER BY w.since LIMIT 1 FOR UPDATE OF w SKIP LOCKED),
taken AS (
	INSERT INTO webhook_sending (delivery_id, endpoint_id, tenant_id, until)
	SELECT delivery_id, endpoint_id, $1, now() + $4::interval FROM next
	ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = NULL
	RETURNING delivery_id)
DELETE FROM webhook_waiting w USING taken WHERE w.delivery_id = taken.delivery_id
RETURNING w.delivery_id`

// SweepLineInterval is how often every worker sweeps the lines
// (SweepLines): a second, so that a line whose places all died waits
// little longer than they count; a sweep with no line is one read.
const SweepLineInterval = time.Second

// SweepLines runs SweepLine every interval until ctx ends. Every worker
// runs it, not River's leader alone, so that neither a dead leader's term
// nor a new leader's election holds a line up: sweeps of several workers may
// overlap, each tenant's taken under its lock.
func (d *Deliverer) SweepLines(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		handed, err := d.SweepLine(ctx)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "sweep the webhook lines", "err", err)
		}
		if handed > 0 {
			logger.InfoContext(ctx, "webhook places handed to deliveries in line", "handed", handed)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// linesWaiting lists the tenants with deliveries in line.
const linesWaiting = `SELECT DISTINCT tenant_id FROM webhook_waiting`

// SweepLine hands the free places of every tenant with deliveries in line,
// those a dead worker left among them (purgeSlots), to the deliveries
// that have waited longest, and inserts their jobs: the backstop of
// handOver, which hands on only the places of attempts that end. Every
// worker runs it (SweepLines). It returns how many places it handed.
func (d *Deliverer) SweepLine(ctx context.Context) (int, error) {
	rows, _ := d.DB.Query(ctx, linesWaiting)
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list the lines: %w", err)
	}
	handed := 0
	for _, tenant := range tenants {
		var ids []int64
		err := pgx.BeginFunc(ctx, d.DB, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockTenantSlots, tenant); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, purgeSlots, tenant, database.PresenceClass); err != nil {
				return err
			}
			for {
				var id int64
				err := tx.QueryRow(ctx, handFree, tenant, d.EndpointInFlight, d.TenantInFlight, SlotHeld).Scan(&id)
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

// releaseSlot gives up the attempt's place among those in flight.
const releaseSlot = `DELETE FROM webhook_sending WHERE delivery_id = $1`

// passOn hands a's place to the next delivery in line, to its endpoint
// (handOn) or, under the tenant's lock, to another (handOver), and inserts
// that delivery's job; or releases the place when nobody waits who could
// take it. What tx has queued goes with the hand-on; the release is
// queued, to go with the COMMIT.
func (d *Deliverer) passOn(ctx context.Context, tx *database.Tx, a attempt) error {
	var next int64
	err := tx.QueryRow(ctx, handOn, a.id, a.endpoint, SlotHeld).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		lock := &pgx.Batch{}
		lock.Queue(lockTenantSlots, a.tenantID)
		tx.Queue(lock)
		err = tx.QueryRow(ctx, handOver, a.id, a.tenantID, d.EndpointInFlight, SlotHeld).Scan(&next)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		release := &pgx.Batch{}
		release.Queue(releaseSlot, a.id)
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
