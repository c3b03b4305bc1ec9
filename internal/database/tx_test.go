package database_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/testdb"
)

// exchanges records what a pool sends to the server, one entry per round
// trip: a statement's first word, or "batch" and the first word of each
// statement in it.
type exchanges struct {
	mu   sync.Mutex
	sent []string
}

func (e *exchanges) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	e.add(strings.Fields(d.SQL)[0])
	return ctx
}

func (*exchanges) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (e *exchanges) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	words := []string{}
	for _, q := range d.Batch.QueuedQueries {
		words = append(words, strings.Fields(q.SQL)[0])
	}
	e.add("batch(" + strings.Join(words, " ") + ")")
	return ctx
}

func (*exchanges) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*exchanges) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (e *exchanges) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sent = append(e.sent, s)
}

// take returns what was sent since the last take, joined.
func (e *exchanges) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	sent := strings.Join(e.sent, " ")
	e.sent = nil
	return sent
}

// traced is a pool on a fresh database with a table t, whose exchanges are
// recorded.
func traced(t *testing.T) (*pgxpool.Pool, *exchanges) {
	t.Helper()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	ex := &exchanges{}
	cfg := db.Pool.Config()
	cfg.ConnConfig.Tracer = ex
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, ex
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTx: the BEGIN goes with the first statement, the COMMIT with the last
// batch, and a transaction that ran nothing sends nothing; every way it ends
// returns its connection to the pool.
func TestTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BeginWithTheFirstStatementCommitWithTheLast", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		var id int
		if err := tx.QueryRow(ctx, `INSERT INTO t VALUES (1) RETURNING id`).Scan(&id); err != nil || id != 1 {
			t.Fatalf("first statement = %d, %v", id, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (3)`)
		if err := tx.CommitWith(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got, want := ex.take(), "batch(BEGIN INSERT) INSERT batch(INSERT COMMIT)"; got != want {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := count(t, pool); n != 3 {
			t.Fatalf("%d rows committed, want 3", n)
		}
		if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			t.Fatalf("Commit after CommitWith: %v, want ErrTxClosed", err)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Fatalf("%d connections still acquired", n)
		}
	})

	t.Run("OneRoundTrip", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		// What was queued without a callback goes with the COMMIT too.
		queued := &pgx.Batch{}
		queued.Queue(`INSERT INTO t VALUES (0)`)
		tx.Queue(queued)
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1)`)
		b.Queue(`INSERT INTO t VALUES (2)`)
		if err := tx.CommitWith(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got, want := ex.take(), "batch(BEGIN INSERT INSERT INSERT COMMIT)"; got != want {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := count(t, pool); n != 3 {
			t.Fatalf("%d rows committed, want 3", n)
		}
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
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (2)`)
		b.Queue(`INSERT INTO t VALUES (9)`) // taken
		b.Queue(`INSERT INTO t VALUES (3)`)
		err = tx.CommitWith(ctx, b)
		if !database.IsCode(err, "23505") {
			t.Fatalf("CommitWith = %v, want the unique violation", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, pool); n != 1 {
			t.Fatalf("%d rows, want only the one before", n)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Fatalf("%d connections still acquired", n)
		}
		var inTx int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTx); err != nil || inTx != 0 {
			t.Fatalf("%d pooled connections in a transaction, %v", inTx, err)
		}
	})

	t.Run("RollbackUndoes", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `INSERT INTO t SELECT generate_series(1, 3) RETURNING id`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil || len(ids) != 3 {
			t.Fatalf("rows = %v, %v", ids, err)
		}
		var none int
		if err := tx.QueryRow(ctx, `SELECT id FROM t WHERE id = 42`).Scan(&none); !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("no row: %v", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := ex.take(), "batch(BEGIN INSERT) SELECT ROLLBACK"; got != want {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := count(t, pool); n != 0 {
			t.Fatalf("%d rows after the rollback", n)
		}
	})

	t.Run("NothingRunNothingSent", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		for _, end := range []func(*database.Tx) error{
			func(tx *database.Tx) error { return tx.Commit(ctx) },
			func(tx *database.Tx) error { return tx.Rollback(ctx) },
		} {
			tx, err := database.Begin(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if err := end(tx); err != nil {
				t.Fatal(err)
			}
		}
		if got := ex.take(); got != "" {
			t.Fatalf("sent %q for transactions that ran nothing", got)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Fatalf("%d connections still acquired", n)
		}
	})

	// A first statement that fails leaves the transaction begun and
	// failed: the rollback ends it.
	t.Run("FirstStatementFails", func(t *testing.T) {
		t.Parallel()
		pool, _ := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1/0)`); !database.IsCode(err, "22012") {
			t.Fatalf("Exec = %v, want division_by_zero", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); !database.IsCode(err, "25P02") {
			t.Fatalf("after a failed statement: %v, want in_failed_sql_transaction", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, pool); n != 0 {
			t.Fatalf("%d rows", n)
		}
	})

	// Queued statements go with the next statement sent; a queued one that
	// fails is that call's error.
	t.Run("QueuedGoWithTheNext", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1)`)
		b.Queue(`INSERT INTO t VALUES (2)`)
		tx.Queue(b)
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("count = %d, %v", n, err)
		}
		b = &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1)`) // taken
		tx.Queue(b)
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (3)`); !database.IsCode(err, "23505") {
			t.Fatalf("Exec after a failing queued statement = %v, want its unique violation", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := ex.take(), "batch(BEGIN INSERT INSERT SELECT) batch(INSERT INSERT) ROLLBACK"; got != want {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := count(t, pool); n != 0 {
			t.Fatalf("%d rows after the rollback", n)
		}
	})

	// A queued statement's callback that refuses what it read stops the
	// commit: CommitWith reads what was queued before it sends the COMMIT.
	t.Run("QueuedCallbackStopsTheCommit", func(t *testing.T) {
		t.Parallel()
		pool, ex := traced(t)
		tx, err := database.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
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
		after := &pgx.Batch{}
		after.Queue(`INSERT INTO t VALUES (3)`) // no callback: it would go with the COMMIT
		tx.Queue(after)
		last := &pgx.Batch{}
		last.Queue(`INSERT INTO t VALUES (2)`)
		if err := tx.CommitWith(ctx, last); !errors.Is(err, refused) {
			t.Fatalf("CommitWith = %v, want the callback's refusal", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := ex.take(), "batch(BEGIN INSERT) ROLLBACK"; got != want {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if n := count(t, pool); n != 0 {
			t.Fatalf("%d rows committed", n)
		}
	})
}
