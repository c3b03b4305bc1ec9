package database_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/testdb"
)

// traced is a pool on a fresh database with a table t, whose round trips
// are recorded.
func traced(t *testing.T) (*pgxpool.Pool, *testdb.RoundTrips) {
	t.Helper()
	db := testdb.New(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	return db.Traced(t)
}

// begun is a transaction on a traced pool (traced), and the pool.
func begun(t *testing.T) (*database.Tx, *pgxpool.Pool, *testdb.RoundTrips) {
	t.Helper()
	pool, ex := traced(t)
	return begin(t, pool), pool, ex
}

// begin begins a transaction on pool.
func begin(t *testing.T, pool *pgxpool.Pool) *database.Tx {
	t.Helper()
	tx, err := database.Begin(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// batch is a batch of the statements sqls.
func batch(sqls ...string) *pgx.Batch {
	b := &pgx.Batch{}
	for _, sql := range sqls {
		b.Queue(sql)
	}
	return b
}

// expect fails t unless what was sent since the last Take is want: an
// entry a round trip, a statement's first word or, for a batch, "batch(...)"
// of the first word of each statement in it, joined.
func expect(t *testing.T, ex *testdb.RoundTrips, want string) {
	t.Helper()
	var sent []string
	for _, trip := range ex.Take() {
		words := make([]string, len(trip.SQL))
		for i, sql := range trip.SQL {
			words[i] = strings.Fields(sql)[0]
		}
		if trip.Batch {
			sent = append(sent, "batch("+strings.Join(words, " ")+")")
		} else {
			sent = append(sent, words...)
		}
	}
	if got := strings.Join(sent, " "); got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

// rolledBack rolls tx back, which must succeed.
func rolledBack(t *testing.T, tx *database.Tx) {
	t.Helper()
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// undone rolls tx back, and fails t unless sent was what it sent and
// table t is empty.
func undone(t *testing.T, tx *database.Tx, pool *pgxpool.Pool, ex *testdb.RoundTrips, sent string) {
	t.Helper()
	rolledBack(t, tx)
	expect(t, ex, sent)
	rows(t, pool, 0)
}

// rows fails t unless table t holds want rows.
func rows(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%d rows in t, want %d", n, want)
	}
}

// released fails t unless every connection of pool is back in it.
func released(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still acquired", n)
	}
}

// TestTx: the BEGIN goes with the first statement, the COMMIT with the last
// batch, and a transaction that ran nothing sends nothing; every way it ends
// returns its connection to the pool.
func TestTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BeginWithTheFirstStatementCommitWithTheLast", func(t *testing.T) {
		t.Parallel()
		tx, pool, ex := begun(t)
		var id int
		if err := tx.QueryRow(ctx, `INSERT INTO t VALUES (1) RETURNING id`).Scan(&id); err != nil || id != 1 {
			t.Fatalf("first statement = %d, %v", id, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
			t.Fatal(err)
		}
		if err := tx.CommitWith(ctx, batch(`INSERT INTO t VALUES (3)`)); err != nil {
			t.Fatal(err)
		}
		expect(t, ex, "batch(BEGIN INSERT) INSERT batch(INSERT COMMIT)")
		rows(t, pool, 3)
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Fatalf("Commit after CommitWith: %v, want ErrTxClosed", err)
		}
		released(t, pool)
	})

	t.Run("OneRoundTrip", func(t *testing.T) {
		t.Parallel()
		tx, pool, ex := begun(t)
		// What was queued without a callback goes with the COMMIT too.
		tx.Queue(batch(`INSERT INTO t VALUES (0)`))
		if err := tx.CommitWith(ctx, batch(`INSERT INTO t VALUES (1)`, `INSERT INTO t VALUES (2)`)); err != nil {
			t.Fatal(err)
		}
		expect(t, ex, "batch(BEGIN INSERT INSERT INSERT COMMIT)")
		rows(t, pool, 3)
	})

	// A statement of the last batch fails: the server skips the rest and
	// the COMMIT, the rollback undoes what ran before, and the connection
	// goes back to the pool fit to use.
	t.Run("FailedBatchCommitsNothing", func(t *testing.T) {
		t.Parallel()
		pool, _ := traced(t)
		if _, err := pool.Exec(ctx, `INSERT INTO t VALUES (9)`); err != nil {
			t.Fatal(err)
		}
		tx := begin(t, pool)
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		// 9 is taken.
		err := tx.CommitWith(ctx, batch(`INSERT INTO t VALUES (2)`, `INSERT INTO t VALUES (9)`, `INSERT INTO t VALUES (3)`))
		if !database.IsCode(err, "23505") {
			t.Fatalf("CommitWith = %v, want the unique violation", err)
		}
		rolledBack(t, tx)
		rows(t, pool, 1) // only the one before
		released(t, pool)
		var inTx int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTx); err != nil || inTx != 0 {
			t.Fatalf("%d pooled connections in a transaction, %v", inTx, err)
		}
	})

	t.Run("RollbackUndoes", func(t *testing.T) {
		t.Parallel()
		tx, pool, ex := begun(t)
		rs, err := tx.Query(ctx, `INSERT INTO t SELECT generate_series(1, 3) RETURNING id`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rs, pgx.RowTo[int])
		if err != nil || len(ids) != 3 {
			t.Fatalf("rows = %v, %v", ids, err)
		}
		var none int
		if err := tx.QueryRow(ctx, `SELECT id FROM t WHERE id = 42`).Scan(&none); !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("no row: %v", err)
		}
		undone(t, tx, pool, ex, "batch(BEGIN INSERT) SELECT ROLLBACK")
	})

	t.Run("NothingRunNothingSent", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		for _, end := range []func(*database.Tx) error{
			func(tx *database.Tx) error { return tx.Commit(ctx) },
			func(tx *database.Tx) error { return tx.Rollback(ctx) },
		} {
			if err := end(begin(t, pool)); err != nil {
				t.Fatal(err)
			}
		}
		expect(t, ex, "") // for transactions that ran nothing
		released(t, pool)
	})

	// A first statement that fails leaves the transaction begun and
	// failed: the rollback ends it.
	t.Run("FirstStatementFails", func(t *testing.T) {
		t.Parallel()
		tx, pool, _ := begun(t)
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1/0)`); !database.IsCode(err, "22012") {
			t.Fatalf("Exec = %v, want division_by_zero", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); !database.IsCode(err, "25P02") {
			t.Fatalf("after a failed statement: %v, want in_failed_sql_transaction", err)
		}
		rolledBack(t, tx)
		rows(t, pool, 0)
	})

	// Queued statements go with the next statement sent; a queued one that
	// fails is that call's error.
	t.Run("QueuedGoWithTheNext", func(t *testing.T) {
		t.Parallel()
		tx, pool, ex := begun(t)
		tx.Queue(batch(`INSERT INTO t VALUES (1)`, `INSERT INTO t VALUES (2)`))
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("count = %d, %v", n, err)
		}
		tx.Queue(batch(`INSERT INTO t VALUES (1)`)) // taken
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (3)`); !database.IsCode(err, "23505") {
			t.Fatalf("Exec after a failing queued statement = %v, want its unique violation", err)
		}
		undone(t, tx, pool, ex, "batch(BEGIN INSERT INSERT SELECT) batch(INSERT INSERT) ROLLBACK")
	})

	// A queued statement's callback that refuses what it read stops the
	// commit: CommitWith reads what was queued before it sends the COMMIT.
	t.Run("QueuedCallbackStopsTheCommit", func(t *testing.T) {
		t.Parallel()
		tx, pool, ex := begun(t)
		refused := errors.New("not what was expected")
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1) RETURNING id`).QueryRow(func(row pgx.Row) error {
			var id int
			if err := row.Scan(&id); err != nil {
				return err
			}
			return refused
		})
		tx.Queue(b)
		tx.Queue(batch(`INSERT INTO t VALUES (3)`)) // no callback: it would go with the COMMIT
		if err := tx.CommitWith(ctx, batch(`INSERT INTO t VALUES (2)`)); !errors.Is(err, refused) {
			t.Fatalf("CommitWith = %v, want the callback's refusal", err)
		}
		undone(t, tx, pool, ex, "batch(BEGIN INSERT) ROLLBACK")
	})
}
