package database_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/example/payments/internal/database"
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
