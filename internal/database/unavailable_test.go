package database_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testdb"
)

// TestIsUnavailable: the errors a failover produces, made for real, say the
// database went away (a backend terminated under its connection, a write
// refused as read-only, a server that cannot be reached); the errors of a
// database that answered do not.
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	ctx := context.Background()
	connect := func(t *testing.T, url string) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}

	t.Run("Terminated", func(t *testing.T) {
		t.Parallel()
		conn := connect(t, db.URL)
		db.Exec(t, `SELECT pg_terminate_backend($1)`, conn.PgConn().PID())
		_, err := conn.Exec(ctx, `SELECT 1`)
		if err == nil || !database.IsUnavailable(err) || !database.NotExecuted(err) {
			t.Fatalf("a statement on a terminated backend: %v, not executed %t", err, database.NotExecuted(err))
		}
	})
	t.Run("OwnDeadline", func(t *testing.T) {
		t.Parallel()
		// A statement cut by its caller's own deadline fails as a network
		// timeout: the database did not go away, the caller ran out.
		conn := connect(t, db.URL)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := conn.Exec(short, `SELECT pg_sleep(5)`)
		if err == nil || database.WentAway(short, err) {
			t.Fatalf("a statement past its caller's deadline: %v, went away %t", err, database.WentAway(short, err))
		}
		// Reported after the context, by the error alone.
		if database.WentAway(ctx, err) {
			t.Fatalf("a deadline's error taken for the database gone: %v", err)
		}
		gone := connect(t, db.URL)
		db.Exec(t, `SELECT pg_terminate_backend($1)`, gone.PgConn().PID())
		if _, err := gone.Exec(ctx, `SELECT 1`); !database.WentAway(ctx, err) {
			t.Fatalf("a terminated backend, within the deadline: %v, want gone", err)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		t.Parallel()
		conn := connect(t, db.URL)
		// A standby refuses a write so: a demoted primary's connection.
		if _, err := conn.Exec(ctx, `SET default_transaction_read_only = on`); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Exec(ctx, `INSERT INTO t VALUES (1)`)
		if !database.IsCode(err, "25006") || !database.IsUnavailable(err) || !database.NotExecuted(err) {
			t.Fatalf("a write refused as read-only: %v", err)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		_, err := pgx.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
		if err == nil || !database.IsUnavailable(err) || !database.NotExecuted(err) {
			t.Fatalf("a connection refused: %v", err)
		}
	})
	// The server commits and its answer is lost with the connection: the
	// database went away, and the statement may well have run. Through
	// PgBouncer in transaction mode, the pooler loses its server connection
	// after the COMMIT went out and answers the client with an error of its
	// own (08P01, "server conn crashed?"), which no more proves that nothing
	// ran than the cut does.
	// Literal values: the simple protocol, as through any pooler.
	for _, c := range []struct {
		name, insert string
		id           int
		pooled       bool
	}{
		{"CommitAnswerLost", `INSERT INTO t VALUES (3)`, 3, false},
		{"CommitAnswerLostBehindPooler", `INSERT INTO t VALUES (4)`, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(db.URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := stacktest.NewProxy(t, u.Host)
			u.Host = proxy.Addr()
			dbURL := u.String()
			if c.pooled {
				if dbURL, err = startPooler(t, dbURL).URL(dbURL); err != nil {
					t.Fatal(err)
				}
			}
			conn := connect(t, dbURL)
			proxy.LoseCommitAnswer()
			b := &pgx.Batch{}
			b.Queue(`BEGIN`)
			b.Queue(c.insert)
			b.Queue(`COMMIT`)
			err = conn.SendBatch(ctx, b).Close()
			if err == nil || !database.IsUnavailable(err) || database.NotExecuted(err) {
				t.Fatalf("a commit whose answer was lost: %v, unavailable %t, not executed %t",
					err, database.IsUnavailable(err), database.NotExecuted(err))
			}
			if n := db.Count(t, `SELECT count(*) FROM t WHERE id = $1`, c.id); n != 1 {
				t.Fatalf("the commit whose answer was lost left %d rows, want 1", n)
			}
		})
	}
	t.Run("Answered", func(t *testing.T) {
		t.Parallel()
		conn := connect(t, db.URL)
		for _, sql := range []string{`INSERT INTO t VALUES (2), (2)`, `SELECT 1/0`, `SELECT * FROM missing`} {
			if _, err := conn.Exec(ctx, sql); err == nil || database.IsUnavailable(err) {
				t.Errorf("%s: %v, a database that answered", sql, err)
			}
		}
	})
}
