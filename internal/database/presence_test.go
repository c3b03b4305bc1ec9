package database_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/pgbouncer"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestPresence: a presence is held while its process lives, taken back when
// its session is cut, and free once closed, as another session sees it
// through pg_try_advisory_xact_lock, which takes only a lock nobody holds.
func TestPresence(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	p, err := database.HoldPresence(ctx, db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	if p.ID <= 0 {
		t.Fatalf("presence ID %d, want positive", p.ID)
	}
	free := func() bool {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // only looking
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, database.PresenceClass, p.ID).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	held := func() bool { return !free() }
	if !held() {
		t.Fatal("a presence just taken is free")
	}
	// Its session cut from the server's side (a restart, a network cut):
	// taken back on a new one.
	holder := func() (pid int) {
		err := db.Pool.QueryRow(ctx, `
SELECT coalesce(max(pid), 0) FROM pg_locks
WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2 AND granted`,
			int64(uint32(database.PresenceClass)), int64(p.ID)).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := holder()
	var cut bool
	if err := db.Pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, first).Scan(&cut); err != nil || !cut {
		t.Fatalf("cut the presence's session %d: %v, %v", first, cut, err)
	}
	testwait.For(t, "the presence taken back on a new session", func() bool {
		pid := holder()
		return pid != 0 && pid != first
	})
	if !held() {
		t.Fatal("a presence taken back is free")
	}
	p.Close()
	closed = true
	// The server ends the session, and with it the lock, once it has read
	// the client's goodbye: soon after Close returns, not before.
	testwait.For(t, "the closed presence freed", free)
}

// TestPresenceThroughPooler: through PgBouncer in transaction mode, which
// hands the server session a presence would be held on to other clients
// between their transactions, HoldPresence refuses, and holds nothing.
func TestPresenceThroughPooler(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	p, err := database.HoldPresence(ctx, throughPooler(t, db.URL), slog.New(slog.NewTextHandler(io.Discard, nil)))
	switch {
	case err == nil:
		t.Cleanup(p.Close)
		t.Errorf("HoldPresence through a pooler in transaction mode held presence %d", p.ID)
	case !errors.Is(err, database.ErrPresenceThroughPooler):
		t.Errorf("HoldPresence through a pooler in transaction mode: %v, want ErrPresenceThroughPooler", err)
	default:
		t.Log(err)
	}
	held := db.Count(t, `
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND classid::bigint = $1 AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint32(database.PresenceClass)))
	if held != 0 {
		t.Errorf("%d presence locks held on the pooler's backends", held)
	}
}

// throughPooler starts PgBouncer in transaction mode in front of dbURL's
// server, stopped when t ends, and returns dbURL through it. A missing
// pgbouncer fails t: .ci/run installs it.
func throughPooler(t *testing.T, dbURL string) string {
	t.Helper()
	upstream, err := pgbouncer.Upstream(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(), below a directory only its owner may enter: run as
	// root, PgBouncer runs as postgres, who must read its files.
	dir, err := os.MkdirTemp("", "payments-presence-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Several server connections, as in production: the check must not
	// need a pool of one to see the sharing.
	bouncer, err := pgbouncer.Start(upstream, 4, dir)
	if err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	t.Cleanup(bouncer.Stop)
	pooled, err := bouncer.URL(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return pooled
}
