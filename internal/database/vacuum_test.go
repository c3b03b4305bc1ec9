package database_test

import (
	"testing"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/testdb"
)

// TestVacuum: Vacuum vacuums each table it is given, autovacuum or not
// (vacuum_count counts only the vacuums asked for), and a table a vacuum
// holds is skipped rather than waited for.
func TestVacuum(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, sql := range []string{
		`CREATE TABLE churn (id bigint PRIMARY KEY) WITH (autovacuum_enabled = off)`,
		`CREATE TABLE churn2 (id bigint PRIMARY KEY) WITH (autovacuum_enabled = off)`,
		`INSERT INTO churn SELECT generate_series(1, 1000)`,
		`DELETE FROM churn`,
	} {
		db.Exec(t, sql)
	}
	vacuumed := func() int {
		t.Helper()
		return db.Count(t, `SELECT coalesce(sum(vacuum_count), 0) FROM pg_stat_user_tables
WHERE relname IN ('churn', 'churn2')`)
	}
	if n := vacuumed(); n != 0 {
		t.Fatalf("vacuumed %d times before any vacuum", n)
	}
	ctx := t.Context()
	if err := database.Vacuum(ctx, db.Pool, "churn", "churn2"); err != nil {
		t.Fatal(err)
	}
	if n := vacuumed(); n != 2 {
		t.Fatalf("vacuum_count = %d after one vacuum of the two tables, want 2", n)
	}
	// A table another session holds locked is skipped at once.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `LOCK TABLE churn2 IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := database.Vacuum(ctx, db.Pool, "churn", "churn2"); err != nil {
		t.Fatal(err)
	}
	if n := vacuumed(); n != 3 {
		t.Fatalf("vacuum_count = %d with churn2 held, want 3 (churn vacuumed, churn2 skipped)", n)
	}
}
