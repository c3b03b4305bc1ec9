package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testkind"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// admitted reports whether the migrated schema's checks admit a kind: its
// type in the reconciliation queue, its recovery point on a key. It writes
// in a transaction it rolls back.
func admitted(ctx context.Context, t *testing.T, db *testdb.DB, n operation.Names) error {
	t.Helper()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_check', 'Check')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO reconciliations (resource_type, resource_id) VALUES ($1, 'x')`, n.Type); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	resource_type, resource_id, created_at, updated_at)
VALUES ('ten_check', 'k', 'POST', $1, '\x00', $2, $3, 'x', now(), now())`, n.Path, n.CreatedPoint(), n.Type)
	return err
}

// TestKinds: every kind of the list is whole. Its declaration is one the
// machinery runs on (catalog.Kinds checks the list, parents included); the
// migrations admit
// its type and its recovery point; its own SQL runs against the migrated
// schema and says "not found" as every kind does.
func TestKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	kinds := catalog.Kinds(nil)
	if len(kinds.Kinds()) < 2 {
		t.Fatalf("kinds = %v", kinds.Types())
	}
	for _, k := range kinds.Kinds() {
		n := k.Names()
		t.Run(n.Type, func(t *testing.T) {
			if err := admitted(ctx, t, db, n); err != nil {
				t.Fatalf("the migrations do not admit %s: %v (a migration widens reconciliations_resource_type_check and recovery_point_known)", n.Type, err)
			}
			missing := operation.NewID(n.Prefix)
			if _, err := k.Load(ctx, db.Pool, missing, 0); !errors.Is(err, operation.ErrNotFound) {
				t.Errorf("Load of a missing %s: %v, want ErrNotFound", n.Type, err)
			}
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			if _, err := k.Final(ctx, tx, missing); !errors.Is(err, operation.ErrNotFound) {
				t.Errorf("Final of a missing %s: %v, want ErrNotFound", n.Type, err)
			}
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
			if found, err := k.Accounted(ctx, db.Pool, []string{missing}); err != nil || len(found) != 0 {
				t.Errorf("Accounted of a missing %s: %v, %v", n.Type, found, err)
			}
		})
	}
	// The check above can fail: a kind no migration admits is refused.
	if err := admitted(ctx, t, db, testkind.Names); err == nil {
		t.Error("the schema admits the widget, which no migration declares: the check proves nothing")
	}
}
