package webhooks

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/testdb"
)

// TestSweepAfterFailover: a worker takes another's absent presence for
// death (revivePlaces gives the place to a new job, purgePlaces frees it) at
// once while the database serves on, but not for the places claimed on
// another server, as before a failover: their workers may be alive, taking
// their presences back, their attempts in flight. However that server's
// clock ran, ahead or behind: no time from it is compared with this one's.
func TestSweepAfterFailover(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.DemoTenants)
	ctx := t.Context()
	db.Exec(t, insertEndpoint, "we_1", "ten_acme", "https://merchant.example/hooks", []string{"*"}, "", time.Now())
	// One delivery pending, whose place a revive gives a new job, and one
	// delivered, whose place a purge frees.
	var pending int64
	for _, status := range []string{"pending", "delivered"} {
		db.Exec(t, `INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
			VALUES ($1, 'ten_acme', 'payment.succeeded', 'pay_1', '{}', now())`, "evt_"+status)
		var id int64
		if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status)
			VALUES ('ten_acme', 'we_1', $1, $2) RETURNING id`, "evt_"+status, status).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if status == "pending" {
			pending = id
		}
	}
	// Both claimed now by worker 111, whose presence nobody holds.
	claim := func() {
		t.Helper()
		db.Exec(t, `INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until, worker, instance)
			SELECT id, 'we_1', 'ten_acme', now() + $1::interval, 111, pg_postmaster_start_time() FROM webhook_deliveries
			ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = excluded.worker, instance = excluded.instance`, PlaceHeld)
	}
	// sweep runs the revive and the purge, rolled back, and returns the
	// deliveries revived and the places purged.
	sweep := func() (revived []int64, purged int64) {
		t.Helper()
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // rolled back on purpose
		rows, _ := tx.Query(ctx, revivePlaces, "ten_acme", database.PresenceClass, PlaceHeld)
		if revived, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			t.Fatal(err)
		}
		tag, err := tx.Exec(ctx, purgePlaces, "ten_acme", database.PresenceClass)
		if err != nil {
			t.Fatal(err)
		}
		return revived, tag.RowsAffected()
	}

	claim()
	if revived, purged := sweep(); len(revived) != 1 || revived[0] != pending || purged != 1 {
		t.Fatalf("the database serving on: %v revived, %d purged; want %d, 1", revived, purged, pending)
	}
	// Claimed on the server before a failover, whose clock ran ahead of
	// this one's, or with it. (One that ran behind gave until times that
	// have passed here: such places are freed as any place past its until,
	// a share of the endpoint's, and never revived.)
	for _, skew := range []string{"1 hour", "0"} {
		claim()
		db.Exec(t, `UPDATE webhook_places SET instance = instance - interval '1 day', until = until + $1::interval`, skew)
		if revived, purged := sweep(); len(revived) != 0 || purged != 0 {
			t.Fatalf("claimed on another server, its clock off by %s: %v revived, %d purged; want neither", skew, revived, purged)
		}
	}
	claim()
	db.Exec(t, `UPDATE webhook_places SET instance = instance - interval '1 day', until = until - interval '1 hour'`)
	if revived, _ := sweep(); len(revived) != 0 {
		t.Fatalf("claimed on another server, its clock an hour behind: %v revived, want none", revived)
	}
	claim() // again, since
	if revived, purged := sweep(); len(revived) != 1 || revived[0] != pending || purged != 1 {
		t.Fatalf("claimed since the failover: %v revived, %d purged; want %d, 1", revived, purged, pending)
	}
}

// TestClaimWithoutPresenceHoldsAsNobody: a worker whose presence is lost (a
// failover cut it, and it is not taken back yet) claims an attempt's place
// as nobody, so that no other worker takes the attempt in flight for a dead
// worker's (another's transaction holding its lock for a moment is no
// presence, nor is a worker of its id's in another database); with its
// presence held, as itself.
func TestClaimWithoutPresenceHoldsAsNobody(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.DemoTenants)
	ctx := t.Context()
	db.Exec(t, insertEndpoint, "we_1", "ten_acme", "https://merchant.example/hooks", []string{"*"}, "", time.Now())
	db.Exec(t, `INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
		VALUES ('evt_1', 'ten_acme', 'payment.succeeded', 'pay_1', '{}', now())`)
	var id int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status)
		VALUES ('ten_acme', 'we_1', 'evt_1', 'pending') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until) VALUES ($1, 'we_1', 'ten_acme', now() + interval '1 minute')`, id)
	me, err := database.HoldPresence(ctx, db.URL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(me.Close)
	// Another worker's transaction testing whether me+1 lives holds its
	// lock for a moment: that is no presence.
	other, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx) //nolint:errcheck // rolled back on purpose
	if _, err := other.Exec(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, database.PresenceClass, me.ID+1); err != nil {
		t.Fatal(err)
	}
	// A worker of the same id in another database on the server holds
	// its presence there: that is no presence here.
	elsewhere := testdb.New(t)
	conn, err := pgx.Connect(ctx, elsewhere.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET application_name = '`+database.PresenceApplication+`'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, database.PresenceClass, me.ID+3); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		worker, want int32
	}{{me.ID + 1, 0}, {me.ID + 2, 0}, {me.ID + 3, 0}, {me.ID, me.ID}} {
		var a attempt
		if err := db.Pool.QueryRow(ctx, claimAttempt, id, PlaceHeld, c.worker, 1, database.PresenceClass, database.PresenceApplication).Scan(
			&a.tenantID, &a.endpoint, &a.eventID, &a.chain, &a.number, &a.url, &a.status, &a.version, &a.sealed, &a.worker); err != nil {
			t.Fatal(err)
		}
		stored := int32(db.Count(t, `SELECT coalesce(worker, 0) FROM webhook_places WHERE delivery_id = $1`, id))
		if a.worker != c.want || stored != c.want {
			t.Errorf("worker %d claimed as %d (stored %d), want %d", c.worker, a.worker, stored, c.want)
		}
	}
}
