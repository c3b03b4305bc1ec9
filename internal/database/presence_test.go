package database_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	p := holdPresence(t, db.URL)
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
	holder := func() int { return presenceHolder(t, db, p.ID) }
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
	// The server ends the session, and with it the lock, once it has read
	// the client's goodbye: soon after Close returns, not before.
	testwait.For(t, "the closed presence freed", free)
}

// holdPresence holds a presence through dbURL, closed when t ends; a test
// may close it before, as a second Close does nothing.
func holdPresence(t *testing.T, dbURL string) *database.Presence {
	t.Helper()
	p, err := database.HoldPresence(context.Background(), dbURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("HoldPresence through %s: %v", dbURL, err)
	}
	t.Cleanup(p.Close)
	return p
}

// presenceHolder is the pid of the backend holding presence id, 0 when
// none does.
func presenceHolder(t *testing.T, db *testdb.DB, id int32) (pid int) {
	t.Helper()
	err := db.Pool.QueryRow(context.Background(), `
SELECT coalesce(max(pid), 0) FROM pg_locks
WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2 AND granted`,
		int64(uint32(database.PresenceClass)), int64(id)).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
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

// TestPresenceBehindPoolers: two PgBouncers in transaction mode behind a
// round-robin, as a usual Kubernetes set-up has them, which the check for
// a pooler cannot see (its probe goes to the other one). The presence is
// held, and safely: no other client of the poolers re-enters it, whatever
// backend they are given, and once it is closed its lock is gone from the
// server, not left on a pooled backend for a dead process to look alive.
func TestPresenceBehindPoolers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	rr := roundRobin(t, startPooler(t, db.URL).Addr, startPooler(t, db.URL).Addr)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = rr
	p := holdPresence(t, u.String())
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	for i := range 12 {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var free bool
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, database.PresenceClass, p.ID).Scan(&free)
		})
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if free {
			t.Fatalf("client %d of the poolers took the live presence %d for free", i, p.ID)
		}
	}
	p.Close()
	testwait.For(t, "the closed presence's lock gone from the server", func() bool {
		return db.Count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2`,
			int64(uint32(database.PresenceClass)), int64(p.ID)) == 0
	})
}

// TestPresenceHoldsNoSnapshot: the presence's open transaction keeps no
// snapshot between its statements, so it holds back neither vacuum nor a
// concurrent index build.
func TestPresenceHoldsNoSnapshot(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	holdPresence(t, db.URL)
	testwait.For(t, "the presence's session idle in its transaction", func() bool {
		return db.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
  AND state = 'idle in transaction'`, database.PresenceApplication) == 1
	})
	if n := db.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
  AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)`, database.PresenceApplication); n != 0 {
		t.Fatalf("the presence's transaction holds a snapshot or an id")
	}
	db.Exec(t, `CREATE TABLE t (id int)`)
	built, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.Pool.Exec(built, `CREATE INDEX CONCURRENTLY t_id ON t (id)`); err != nil {
		t.Fatalf("an index built concurrently beside the presence: %v", err)
	}
}

// throughPooler starts PgBouncer in transaction mode in front of dbURL's
// server, stopped when t ends, and returns dbURL through it.
func throughPooler(t *testing.T, dbURL string) string {
	t.Helper()
	pooled, err := startPooler(t, dbURL).URL(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return pooled
}

// startPooler starts PgBouncer in transaction mode in front of dbURL's
// server, stopped when t ends. A missing pgbouncer fails t: .ci/run
// installs it.
func startPooler(t *testing.T, dbURL string) *pgbouncer.Bouncer {
	t.Helper()
	// Not t.TempDir(), below a directory only its owner may enter: run as
	// root, PgBouncer runs as postgres, who must read its files.
	dir, err := os.MkdirTemp("", "payments-presence-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Several server connections, as in production: the check must not
	// need a pool of one to see the sharing.
	bouncer, err := pgbouncer.Start(dbURL, 4, dir)
	if err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	t.Cleanup(bouncer.Stop)
	return bouncer
}

// roundRobin listens on loopback and sends each connection to the next of
// targets in turn, as a load balancer in front of poolers does, until t
// ends. It returns its address.
func roundRobin(t *testing.T, targets ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for next := 0; ; next++ {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", targets[next%len(targets)])
			if err != nil {
				client.Close()
				continue
			}
			for _, pair := range [][2]net.Conn{{client, server}, {server, client}} {
				wg.Go(func() {
					io.Copy(pair[0], pair[1]) //nolint:errcheck // ends with either side
					pair[0].Close()
					pair[1].Close()
				})
			}
		}
	})
	return ln.Addr().String()
}
