package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// rows are a key at each point, a payment and a refund that keep every rule.
const rows = `
INSERT INTO tenants (id, name) VALUES ('ten_rules', 'Rules');
INSERT INTO idempotency_keys (id, tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	response_status, response_body, created_at, updated_at, finished_at, expires_at)
OVERRIDING SYSTEM VALUE VALUES
	(1, 'ten_rules', 'started', 'POST', '/v1/payments', '\x00', 'started', NULL, NULL, now(), now(), NULL, NULL),
	(2, 'ten_rules', 'finished', 'POST', '/v1/payments', '\x00', 'finished', 201, '{}', now(), now(), now(), now() + interval '1 day'),
	(3, 'ten_rules', 'expired', 'POST', '/v1/payments', '\x00', 'expired', NULL, NULL, now(), now(), now(), now() + interval '30 days');
INSERT INTO payments (id, tenant_id, amount, currency, payment_method, status, created_at, updated_at)
VALUES ('pay_rules', 'ten_rules', 1000, 'USD', 'pm_card_visa', 'processing', now(), now());
INSERT INTO refunds (id, tenant_id, payment_id, amount, currency, status, created_at, updated_at)
VALUES ('re_rules', 'ten_rules', 'pay_rules', 500, 'USD', 'processing', now(), now());`

// newKind is the table of a kind the migrations do not know, with only the
// generic rules, as a new kind's migration makes it, and a row of it that
// keeps them.
const newKind = `
CREATE TABLE widgets (
    id         text PRIMARY KEY,
    tenant_id  text NOT NULL,
    amount     bigint NOT NULL,
    currency   text NOT NULL,
    status     text NOT NULL,
    settled_by text
);
CREATE TRIGGER rules BEFORE INSERT OR UPDATE OF amount, currency, status, settled_by
    ON widgets FOR EACH ROW EXECUTE FUNCTION operation_row_rules('processing', 'made', 'failed');
INSERT INTO widgets (id, tenant_id, amount, currency, status) VALUES ('wid_rules', 'ten_rules', 1000, 'USD', 'processing');
INSERT INTO reconciliations (resource_type, resource_id) VALUES ('payment', 'pay_rules');`

// TestRefundCounted: a refund's success is counted on its payment as its
// status is recorded, once, and a failure after it takes it back; a pending
// refund counts nothing yet.
func TestRefundCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		status   string
		refunded int
	}{{"pending", 0}, {"succeeded", 500}, {"succeeded", 500}, {"failed", 0}, {"failed", 0}, {"succeeded", 500}} {
		if _, err := db.Pool.Exec(ctx, `UPDATE refunds SET status = $1`, step.status); err != nil {
			t.Fatal(err)
		}
		if got := db.Count(t, `SELECT amount_refunded FROM payments WHERE id = 'pay_rules'`); got != step.refunded {
			t.Fatalf("refund %s: the payment has %d refunded, want %d", step.status, got, step.refunded)
		}
	}
}

// TestRowRules: every rule of the rows an operation writes refuses what
// breaks it, with the SQLSTATE and the constraint's name a CHECK constraint
// gives, and admits what keeps it: a payment's, a refund's, and those of a
// kind the migrations do not know, whose key, reconciliation and table need
// no migration but its table's. The tables carry no CHECK constraint, which
// Postgres would parse in each statement.
func TestRowRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, rows+newKind); err != nil {
		t.Fatal(err)
	}
	var checks int
	if err := db.Pool.QueryRow(ctx, `
SELECT count(*) FROM pg_constraint
WHERE contype = 'c' AND conrelid IN ('idempotency_keys'::regclass, 'payments'::regclass, 'refunds'::regclass)`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if checks != 0 {
		t.Errorf("%d CHECK constraints on the operations' tables, want none: their rules are in triggers", checks)
	}

	for _, c := range []struct {
		name, sql string
		// rule is the constraint named in the error; empty when the
		// statement keeps every rule.
		rule string
	}{
		{"an empty key", `UPDATE idempotency_keys SET key = '' WHERE id = 1`, "idempotency_keys_key_check"},
		{"a key of 256 characters", `UPDATE idempotency_keys SET key = repeat('k', 256) WHERE id = 1`, "idempotency_keys_key_check"},
		{"a key of 255 characters", `UPDATE idempotency_keys SET key = repeat('k', 255) WHERE id = 1`, ""},
		{"an unknown recovery point", `UPDATE idempotency_keys SET recovery_point = 'no_such_point' WHERE id = 1`, "idempotency_keys_recovery_point_check"},
		{"a created point", `UPDATE idempotency_keys SET recovery_point = 'refund_created' WHERE id = 1`, ""},
		{"finished without a response", `UPDATE idempotency_keys SET recovery_point = 'finished' WHERE id = 1`, "idempotency_keys_check"},
		{"finished with its response and times", `
UPDATE idempotency_keys SET recovery_point = 'finished', response_status = 201, finished_at = now(), expires_at = now()
WHERE id = 1`, ""},
		{"a response and its times before finishing", `
UPDATE idempotency_keys SET response_status = 201, finished_at = now(), expires_at = now() WHERE id = 1`, "idempotency_keys_check"},
		{"finished without its expiry", `UPDATE idempotency_keys SET expires_at = NULL WHERE id = 2`, "idempotency_keys_check"},
		{"a tombstone that keeps a response", `UPDATE idempotency_keys SET response_body = '{}' WHERE id = 3`, "idempotency_keys_tombstone_check"},
		{"a tombstone without its expiry", `UPDATE idempotency_keys SET expires_at = NULL WHERE id = 3`, "idempotency_keys_tombstone_check"},
		{"a key reaped to a tombstone", `
UPDATE idempotency_keys SET recovery_point = 'expired', response_status = NULL, response_headers = NULL, response_body = NULL
WHERE id = 2`, ""},
		{"a new key at an unknown point", `
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point, created_at, updated_at)
VALUES ('ten_rules', 'new', 'POST', '/v1/payments', '\x00', 'charged', now(), now())`, "idempotency_keys_recovery_point_check"},

		{"a payment of 0", `UPDATE payments SET amount = 0`, "payments_amount_check"},
		{"a payment of 100,000,000", `UPDATE payments SET amount = 100000000`, "payments_amount_check"},
		{"a lowercase currency", `UPDATE payments SET currency = 'usd'`, "payments_currency_check"},
		{"an unknown payment status", `UPDATE payments SET status = 'pending'`, "payments_status_check"},
		{"more refunded than paid", `UPDATE payments SET amount_refunded = 1001`, "payments_check"},
		{"a negative refunded amount", `UPDATE payments SET amount_refunded = -1`, "payments_check"},
		{"all of it refunded", `UPDATE payments SET amount_refunded = 1000`, ""},
		{"settled by someone unknown", `UPDATE payments SET settled_by = 'operator'`, "payments_settled_by_check"},
		{"settled by the worker", `UPDATE payments SET status = 'succeeded', settled_by = 'worker'`, ""},
		{"a new payment of 0", `
INSERT INTO payments (id, tenant_id, amount, currency, payment_method, status, created_at, updated_at)
VALUES ('pay_zero', 'ten_rules', 0, 'USD', 'pm_card_visa', 'processing', now(), now())`, "payments_amount_check"},

		{"a refund of 0", `UPDATE refunds SET amount = 0`, "refunds_amount_check"},
		{"an unknown refund reason", `UPDATE refunds SET reason = 'whim'`, "refunds_reason_check"},
		{"a refund reason", `UPDATE refunds SET reason = 'requested_by_customer'`, ""},
		{"an unknown refund status", `UPDATE refunds SET status = 'paid'`, "refunds_status_check"},
		{"a pending refund", `UPDATE refunds SET status = 'pending'`, ""},
		{"a payment may not wait", `UPDATE payments SET status = 'pending'`, "payments_status_check"},
		{"a refund settled by someone unknown", `UPDATE refunds SET settled_by = 'operator'`, "refunds_settled_by_check"},
		{"a refund's lowercase currency", `UPDATE refunds SET currency = 'usd'`, "refunds_currency_check"},
		{"a refund of more than is left", `UPDATE payments SET amount_refunded = 600; UPDATE refunds SET status = 'succeeded'`, "payments_check"},

		{"a new kind's recovery point", `UPDATE idempotency_keys SET recovery_point = 'bank_payout_created' WHERE id = 1`, ""},
		{"a created point in capitals", `UPDATE idempotency_keys SET recovery_point = 'Payout_created' WHERE id = 1`, "idempotency_keys_recovery_point_check"},
		{"a created point of no object", `UPDATE idempotency_keys SET recovery_point = 'created' WHERE id = 1`, "idempotency_keys_recovery_point_check"},
		{"a created point of an empty word", `UPDATE idempotency_keys SET recovery_point = 'payout__created' WHERE id = 1`, "idempotency_keys_recovery_point_check"},
		{"a new kind reconciled", `INSERT INTO reconciliations (resource_type, resource_id) VALUES ('bank_payout', 'wid_rules')`, ""},
		{"a reconciled type in capitals", `UPDATE reconciliations SET resource_type = 'Payout'`, "reconciliations_resource_type_check"},
		{"a reconciled type with a dash", `UPDATE reconciliations SET resource_type = 'bank-payout'`, "reconciliations_resource_type_check"},

		{"a new kind's status", `UPDATE widgets SET status = 'made', settled_by = 'webhook'`, ""},
		{"another kind's status", `UPDATE widgets SET status = 'succeeded'`, "widgets_status_check"},
		{"a new kind's amount of 0", `UPDATE widgets SET amount = 0`, "widgets_amount_check"},
		{"a new kind's amount of 100,000,000", `UPDATE widgets SET amount = 100000000`, "widgets_amount_check"},
		{"a new kind's lowercase currency", `UPDATE widgets SET currency = 'usd'`, "widgets_currency_check"},
		{"a new kind settled by someone unknown", `UPDATE widgets SET settled_by = 'operator'`, "widgets_settled_by_check"},
		{"a new kind's row of 0", `
INSERT INTO widgets (id, tenant_id, amount, currency, status) VALUES ('wid_zero', 'ten_rules', 0, 'USD', 'processing')`, "widgets_amount_check"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // only ever rolled back
			_, err = tx.Exec(ctx, c.sql)
			var pgErr *pgconn.PgError
			switch {
			case c.rule == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.rule == "":
			case !errors.As(err, &pgErr):
				t.Errorf("err = %v, want %s's check_violation", err, c.rule)
			case pgErr.Code != "23514" || pgErr.ConstraintName != c.rule:
				t.Errorf("SQLSTATE %s naming %q (%s), want 23514 naming %q", pgErr.Code, pgErr.ConstraintName, pgErr.Message, c.rule)
			}
		})
	}
}

// TestTenantInUse: a tenant with rows in a table that carries its tenant
// without a foreign key is not deleted (SQLSTATE 23503, tenants_in_use),
// whichever table holds them; a tenant with none is.
func TestTenantInUse(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	db.Exec(t, rows)
	for _, c := range []struct{ name, empty string }{
		{"a refund", `DELETE FROM refunds`},
		{"a payment", `DELETE FROM payments`},
		{"a key", `DELETE FROM idempotency_keys WHERE id > 1`},
	} {
		var pgErr *pgconn.PgError
		_, err := db.Pool.Exec(t.Context(), `DELETE FROM tenants WHERE id = 'ten_rules'`)
		if !errors.As(err, &pgErr) || pgErr.Code != "23503" || pgErr.ConstraintName != "tenants_in_use" {
			t.Fatalf("deleting a tenant with %s left: %v", c.name, err)
		}
		db.Exec(t, c.empty)
	}
	db.Exec(t, `DELETE FROM idempotency_keys`)
	db.Exec(t, `DELETE FROM tenants WHERE id = 'ten_rules'`)
	if n := db.Count(t, `SELECT count(*) FROM tenants WHERE id = 'ten_rules'`); n != 0 {
		t.Fatal("a tenant with no rows was not deleted")
	}
}

// TestTenantDeleteRacesFirstPhase races a tenant's delete with a first
// phase for real, both ways round: a delete while a first phase is in
// flight waits for its commit and then refuses, seeing the key it wrote;
// a first phase while a delete is in flight waits for it and then finds
// the tenant gone (23503, tenant_gone), writing nothing.
func TestTenantDeleteRacesFirstPhase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.New(t)
	db.Exec(t, `INSERT INTO tenants (id, name) VALUES ('ten_race', 'Race')`)
	const firstPhase = `INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint,
	recovery_point, created_at, updated_at) VALUES ('ten_race', 'k', 'POST', '/v1/payments', '\x00', 'started', now(), now())`
	waiting := func(what string) {
		t.Helper()
		testwait.For(t, what, func() bool {
			return db.Count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 1
		})
	}

	phase, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer phase.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := phase.Exec(ctx, `SELECT tenant_writes('ten_race')`); err != nil {
		t.Fatal(err)
	}
	if _, err := phase.Exec(ctx, firstPhase); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() {
		_, err := db.Pool.Exec(ctx, `DELETE FROM tenants WHERE id = 'ten_race'`)
		deleted <- err
	}()
	waiting("the delete waiting for the first phase in flight")
	if err := phase.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	if err := <-deleted; !errors.As(err, &pgErr) || pgErr.ConstraintName != "tenants_in_use" {
		t.Fatalf("a delete that raced a first phase: %v, want refused, tenants_in_use", err)
	}

	db.Exec(t, `DELETE FROM idempotency_keys`)
	del, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer del.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := del.Exec(ctx, `DELETE FROM tenants WHERE id = 'ten_race'`); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		wrote <- pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT tenant_writes('ten_race')`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, firstPhase)
			return err
		})
	}()
	waiting("the first phase waiting for the delete in flight")
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; !errors.As(err, &pgErr) || pgErr.Code != "23503" || pgErr.ConstraintName != "tenant_gone" {
		t.Fatalf("a first phase that raced a delete: %v, want refused, tenant_gone", err)
	}
	if n := db.Count(t, `SELECT count(*) FROM idempotency_keys WHERE tenant_id = 'ten_race'`); n != 0 {
		t.Fatalf("%d keys of a deleted tenant", n)
	}
}
