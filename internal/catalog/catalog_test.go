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
// migrations admit its type and its recovery point; the machinery's SQL
// over its table and the kind's own run against the migrated schema and
// say "not found" as every kind does.
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
			if _, err := operation.Load(ctx, db.Pool, k, missing, 0); !errors.Is(err, operation.ErrNotFound) {
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
		})
	}
	// The checks above can fail: a type that is no name is refused, and a
	// kind whose table no migration makes is not found for another reason.
	bad := testkind.Names
	bad.Type = "Widget-1"
	if err := admitted(ctx, t, db, bad); err == nil {
		t.Error("the schema admits the type Widget-1: the check proves nothing")
	}
	widget := testkind.New(testkind.NewProcessor())
	if _, err := operation.Load(ctx, db.Pool, widget, operation.NewID(testkind.Names.Prefix), 0); err == nil || errors.Is(err, operation.ErrNotFound) {
		t.Errorf("Load of a widget, whose table no migration makes: %v, want another error than ErrNotFound", err)
	}
}
