package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/payments/internal/database"
)

// PlaceHeld is the longest an attempt holds its place among the attempts in
// flight: the attempt's timeout and a margin for the claim and the event's
// read. A delivery's job runs no longer (jobs.DeliveryWorker's timeout),
// so no attempt outlives its place. A place handed to a delivery whose job
// never came for it stops counting after it, and SweepLine hands it on; a
// place whose worker died is freed sooner, as soon as its presence is gone
// (purgePlaces).
const PlaceHeld = AttemptTimeout + 5*time.Second

// deliveryOf reads who a pending delivery is for, and, without a lock,
// whether job $4 is its job (enqueue), whether it holds a place already
// (handed to it, or left by an attempt of its own that never recorded),
// whether it may take one (its endpoint and its tenant have room, places
// past their until not counting: $2, $3) and whether it waits in line: a
// job of a delivery in line that may not (a resend's, say) leaves it there
// without a write or the tenant's lock.
const deliveryOf = `
SELECT d.tenant_id, d.endpoint_id, d.job IS NULL OR d.job = $4,
	EXISTS (SELECT 1 FROM webhook_places s WHERE s.delivery_id = d.id AND s.until > now()),
	(SELECT count(*) FROM webhook_places s WHERE s.endpoint_id = d.endpoint_id AND s.until > now()) < $2
		AND (SELECT count(*) FROM webhook_places s WHERE s.tenant_id = d.tenant_id AND s.until > now()) < $3,
	EXISTS (SELECT 1 FROM webhook_line w WHERE w.delivery_id = d.id)
FROM webhook_deliveries d WHERE d.id = $1 AND d.status = 'pending'`

// takePlace takes a place among the attempts in flight: the delivery's own
// (handed to it, or left by an attempt of its own that never recorded),
// else a new one when the endpoint ($3) and the tenant ($2) each have fewer
// than their share ($4, $5). It runs under the tenant's lock
// (lockTenantPlaces), so that two workers cannot both take the last place,
// after purgePlaces has dropped the tenant's places that no longer count:
// past their until, or held by a worker whose presence is gone (killed,
// its session ended: database.Presence) for a delivery no longer pending,
// which the purge's transaction learns by taking that worker's presence
// lock ($2 its class), as only a lock nobody holds can be taken; a dead
// worker's place of a pending delivery stays that delivery's, for the sweep
// to give it a new job (revivePlaces). A delivery that finds no place joins
// the line (wait, keeping its place there if it had one), in the same
// transaction, and its job ends; one that takes a place leaves the line
// (claimAttempt).
//
// Only the places claimed on this server (their instance, its postmaster's
// start time, which claimAttempt records with the worker) are judged so. A
// failover, or a restart, cuts every session, and the workers take their
// presences back on the new primary a few seconds apart: the first back
// must not take the others, their attempts still in flight, for dead. The
// places claimed before count until their until passes; a worker's death
// while the database serves on is seen at once. No time read on one
// server's clock is compared with another's.
const (
	lockTenantPlaces = `SELECT pg_advisory_xact_lock(hashtextextended('webhook_places:' || $1, 0))`
	purgePlaces      = `
DELETE FROM webhook_places s WHERE tenant_id = $1
	AND (until <= now() OR (worker IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = s.delivery_id AND d.status = 'pending')
		AND instance = pg_postmaster_start_time()
		AND pg_try_advisory_xact_lock($2, worker)))`
	takePlace = `
INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until)
SELECT $1, $3, $2, now() + $6::interval
WHERE EXISTS (SELECT 1 FROM webhook_places WHERE delivery_id = $1)
	OR ((SELECT count(*) FROM webhook_places WHERE endpoint_id = $3) < $4
		AND (SELECT count(*) FROM webhook_places WHERE tenant_id = $2) < $5)
ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = NULL`
	// revivePlaces keeps the places of tenant $1 whose worker's presence
	// ($2 its class) is gone, while their until runs and their delivery is
	// pending, for that delivery: the dead worker's attempt never recorded,
	// and the sweep inserts a new job to make it again at once, under the
	// same number (claimAttempt), rather than when River's rescuer comes by
	// for the dead job, which then finds the delivery another job's. It
	// judges only the places claimed on this server, as purgePlaces does.
	revivePlaces = `
UPDATE webhook_places s SET worker = NULL, until = now() + $3::interval
FROM webhook_deliveries d
WHERE s.tenant_id = $1 AND s.worker IS NOT NULL AND s.until > now()
	AND d.id = s.delivery_id AND d.status = 'pending'
	AND s.instance = pg_postmaster_start_time()
	AND pg_try_advisory_xact_lock($2, s.worker)
RETURNING s.delivery_id`
	wait = `
INSERT INTO webhook_line (delivery_id, endpoint_id, tenant_id)
SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $4)
ON CONFLICT (delivery_id) DO NOTHING`
	// dropPlace gives up a place handed to a delivery that is not pending
	// any more, when job $2 is its job; SweepLine hands it on.
	dropPlace = `
DELETE FROM webhook_places
WHERE delivery_id = $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $2)`
)

// claimAttempt claims the next attempt of a pending delivery that holds a
// place ($1's, whose until it moves on by $2, now held by worker $3: zero
// for none), by its job ($4: enqueue), takes it out of the line, and reads
// what it needs: its chain, the attempt's number, its endpoint as it stands
// (with the version a 410 disables), the secrets that sign now (database
// clock) and the worker the place is held by. A worker whose presence ($5
// its class) is lost (its session cut, as a failover cuts every one, and
// not taken back yet) holds the place as nobody: others would take it for
// dead, and the place counts until its until passes instead. Whether it
// holds its presence, holds_presence says: a lock held by
// a presence's session ($6 its application_name), in this database
// (another service's database on the server has workers of the same ids),
// never another's transaction lock taken to test it (purgePlaces). The
// place records the server it is claimed on (purgePlaces). The number is the chain's recorded attempts and one:
// the attempt is counted when it is recorded (countAttempt), so that one
// that never recorded (its worker killed, its connection lost, before or
// during the POST) is made again under the same number, not the schedule's
// next. No row when the delivery is not pending, holds no place, or is
// another job's: that job's attempt may be in flight on the place, which
// this one leaves alone.
const claimAttempt = `
WITH held AS (
	UPDATE webhook_places SET until = now() + $2::interval, instance = pg_postmaster_start_time(),
		worker = CASE WHEN holds_presence($5, $3, $6) THEN $3::integer END
	WHERE delivery_id = $1 AND until > now()
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $4)
	RETURNING delivery_id, worker),
left_line AS (DELETE FROM webhook_line WHERE delivery_id IN (SELECT delivery_id FROM held)),
d AS (
	SELECT tenant_id, endpoint_id, event_id, chain, attempts + 1 AS attempt FROM webhook_deliveries
	WHERE id = $1 AND status = 'pending' AND EXISTS (SELECT 1 FROM held))
SELECT d.tenant_id, d.endpoint_id, d.event_id, d.chain, d.attempt, e.url, e.status, e.version,
	ARRAY(SELECT s.ciphertext FROM webhook_endpoint_secrets s
		WHERE s.endpoint_id = e.id AND (s.expires_at IS NULL OR s.expires_at > now()) ORDER BY s.id),
	coalesce((SELECT worker FROM held), 0)
FROM d JOIN webhook_endpoints e ON e.id = d.endpoint_id`

// claim takes a place among the attempts in flight and counts the attempt
// of job; pgx.ErrNoRows when the delivery is not pending or not job's, and
// errBusy when it waits in line instead. A delivery handed a place (most of
// them, once a line has formed) is claimed in one round trip, the claim
// and the read of who the delivery is for sent together; one that must take
// a place takes it in two more (takePlace).
func (d *Deliverer) claim(ctx context.Context, id, job int64) (attempt, error) {
	a := attempt{id: id}
	var (
		tenant, endpoint        string
		mine, own, may, waiting bool
		claimErr, whoseErr      error
	)
	b := &pgx.Batch{}
	b.Queue(claimAttempt, id, PlaceHeld, d.Worker, job, database.PresenceClass, database.PresenceApplication).QueryRow(func(row pgx.Row) error {
		claimErr = d.scanAttempt(row, &a)
		return nil
	})
	b.Queue(deliveryOf, id, d.EndpointInFlight, d.TenantInFlight, job).QueryRow(func(row pgx.Row) error {
		whoseErr = row.Scan(&tenant, &endpoint, &mine, &own, &may, &waiting)
		return nil
	})
	if err := d.DB.SendBatch(ctx, b).Close(); err != nil {
		return a, err
	}
	switch {
	case claimErr == nil:
		return a, nil // its place was handed to it: no count changes, no lock
	case !errors.Is(claimErr, pgx.ErrNoRows):
		return a, claimErr
	case errors.Is(whoseErr, pgx.ErrNoRows):
		return a, d.notPending(ctx, id, job)
	case whoseErr != nil:
		return a, whoseErr
	case !mine:
		return a, pgx.ErrNoRows // another job's now: this one is over
	case !may && waiting:
		return a, errBusy
	}
	// No place of its own (or it expired since): it takes one as any other.
	a.tenantID, a.endpoint = tenant, endpoint
	return d.takePlace(ctx, a, job)
}

// takePlace takes a place for a's delivery, which holds none, and counts
// the attempt of job, as claim does, in two round trips, under its tenant's
// lock for one of them: the BEGIN, the lock, the purge, the take and the
// claim go together, and the COMMIT (with the join of the line, when it
// found no place) or the ROLLBACK, when the delivery stopped pending or
// became another job's since it was read, after them, so that the tenant's
// deliveries do not queue on its lock for longer than that.
func (d *Deliverer) takePlace(ctx context.Context, a attempt, job int64) (attempt, error) {
	id := a.id
	tx, err := database.Begin(ctx, d.DB)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var (
		taken    pgconn.CommandTag
		claimErr error
	)
	take := &pgx.Batch{}
	take.Queue(lockTenantPlaces, a.tenantID)
	take.Queue(purgePlaces, a.tenantID, database.PresenceClass)
	take.Queue(takePlace, id, a.tenantID, a.endpoint, d.EndpointInFlight, d.TenantInFlight, PlaceHeld).Exec(func(tag pgconn.CommandTag) error {
		taken = tag
		return nil
	})
	take.Queue(claimAttempt, id, PlaceHeld, d.Worker, job, database.PresenceClass, database.PresenceApplication).QueryRow(func(row pgx.Row) error {
		claimErr = d.scanAttempt(row, &a)
		return nil
	})
	if err := tx.SendBatch(ctx, take).Close(); err != nil {
		return a, err
	}
	switch {
	case taken.RowsAffected() == 0:
		// No place: it joins the line, unless another job's since.
		end := &pgx.Batch{}
		end.Queue(wait, id, a.endpoint, a.tenantID, job)
		if err := tx.CommitWith(ctx, end); err != nil {
			return a, err
		}
		return a, errBusy
	case errors.Is(claimErr, pgx.ErrNoRows):
		// No longer pending, or another job's, since it was read: the place
		// taken goes back with the ROLLBACK, and one handed to it goes too
		// when it is not pending.
		if err := tx.Rollback(ctx); err != nil {
			return a, err
		}
		return a, d.notPending(ctx, id, job)
	case claimErr != nil:
		return a, claimErr
	}
	return a, tx.Commit(ctx)
}

// notPending gives up any place delivery id holds, which is not pending,
// when job is its job: handed to it, or taken as it stopped pending; the
// sweep hands it on. It returns pgx.ErrNoRows, or the error that kept the
// place.
func (d *Deliverer) notPending(ctx context.Context, id, job int64) error {
	if _, err := d.DB.Exec(ctx, dropPlace, id, job); err != nil {
		return err
	}
	return pgx.ErrNoRows
}

// scanAttempt reads claimAttempt's row into a.
func (d *Deliverer) scanAttempt(row pgx.Row, a *attempt) error {
	return row.Scan(&a.tenantID, &a.endpoint, &a.eventID, &a.chain, &a.number, &a.url, &a.status, &a.version, &a.sealed, &a.worker)
}
