package migrations_test

import (
	"context"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/testdb"
)

// folded are the names of the migrations the baseline folds in after the
// first baseline, as goose applied them: 00012_baseline.sql to
// 00030_processor_pace.sql.
var folded = []string{
	"00012_baseline", "00013_webhook_limits", "00014_tenant_rates", "00015_webhook_waiting",
	"00016_webhook_sending_worker", "00017_operation_outbox", "00018_hot_tenant_fks",
	"00019_webhook_delivery_job", "00020_request_digest", "00021_finishing_tenant_fks",
	"00022_deferred_delivery_event", "00023_row_rules", "00024_tenant_delete_guard",
	"00025_reconcile_lease", "00026_processor_event_state", "00027_refund_pending",
	"00028_claims_on_their_server", "00029_tenant_write_lock", "00030_processor_pace",
}

// oldPayments is the first tables of the old baseline, 00012_baseline.sql,
// as it made them.
const oldPayments = `
CREATE TABLE tenants (id text PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE payments (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    amount              bigint NOT NULL CHECK (amount BETWEEN 1 AND 99999999),
    currency            text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status              text NOT NULL CHECK (status IN ('processing', 'succeeded', 'failed')),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);`

// oldMigrations are goose files named as the folded ones, applied through
// the same goose table as the service's: the first one runs sql, the others
// nothing.
func oldMigrations(sql string) fs.FS {
	fsys := fstest.MapFS{}
	for i, name := range folded {
		up := "SELECT 1;"
		if i == 0 {
			up = sql
		}
		fsys[name+".sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\n" + up + "\n")}
	}
	return fsys
}

// emptyDatabase is a new database of t's own, with nothing in it.
func emptyDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := t.Context()
	url := testdb.NewEmpty(t)
	if err := database.EnsureDatabase(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := database.Connect(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestBaselineRefusesOldDatabases: the service's migrator refuses a
// database the migrations before the baseline made, by their goose
// versions or by their payments table, saying which migrations made it and
// what to do, and changes nothing in it; it migrates an empty database, and
// migrates it again as a no-op.
func TestBaselineRefusesOldDatabases(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name string
		make func(ctx context.Context, pool *pgxpool.Pool) error
	}{
		{"TheFoldedMigrations", func(ctx context.Context, pool *pgxpool.Pool) error {
			return database.MigrateGoose(ctx, pool, oldMigrations(oldPayments), "goose_db_version", logger)
		}},
		{"TheirVersionsAlone", func(ctx context.Context, pool *pgxpool.Pool) error {
			return database.MigrateGoose(ctx, pool, oldMigrations("SELECT 1;"), "goose_db_version", logger)
		}},
		{"ThePaymentsTableAlone", func(ctx context.Context, pool *pgxpool.Pool) error {
			_, err := pool.Exec(ctx, oldPayments)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := emptyDatabase(t)
			if err := c.make(ctx, pool); err != nil {
				t.Fatalf("make the old database: %v", err)
			}
			err := database.Migrate(ctx, pool, logger)
			if err == nil {
				t.Fatal("a database made before the baseline was migrated")
			}
			for _, says := range []string{
				"made by the service's migrations before 00031_baseline.sql",
				"00012_baseline.sql to 00030_processor_pace.sql",
				`create a new, empty database and run "api migrate" on it`,
			} {
				if !strings.Contains(err.Error(), says) {
					t.Errorf("refused with %q, which does not say %q", err, says)
				}
			}
			var places *string
			if err := pool.QueryRow(ctx, `SELECT to_regclass('webhook_places')::text`).Scan(&places); err != nil {
				t.Fatal(err)
			}
			if places != nil {
				t.Error("the refused baseline left its tables behind")
			}
		})
	}

	t.Run("AnEmptyDatabase", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := emptyDatabase(t)
		for i := range 2 {
			if err := database.Migrate(ctx, pool, logger); err != nil {
				t.Fatalf("migrate %d: %v", i+1, err)
			}
		}
		var versions string
		if err := pool.QueryRow(ctx, `SELECT string_agg(version_id::text, ',' ORDER BY id) FROM goose_db_version`).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		// The baseline first, once, then whatever a fork adds after it.
		if !strings.HasPrefix(versions+",", "0,31,") || strings.Count(versions, ",31") > 1 {
			t.Errorf("goose versions %s, want 0,31 and the migrations after it, each once", versions)
		}
		var missing []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(t), '{}') FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NULL`,
			[]string{"payments", "refunds", "webhook_places", "webhook_line", "river_job"}).Scan(&missing); err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("tables %v missing after the migrations", missing)
		}
	})
}
