package webhooks_test

import (
	"testing"
	"time"

	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/testdb"
)

// TestPrune: past their retention, deliveries that are over go with their
// attempts, then events no delivery needs, then expired secrets, a batch at
// a time; a pending delivery keeps itself and its event, and nothing recent
// or live is touched.
func TestPrune(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.DemoTenants)
	db.Exec(t, `INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, status, created_at, updated_at)
		VALUES ('we_1', 'ten_acme', 'https://example.com/hooks', '{*}', 'enabled', now(), now())`)
	// Three old events (one still being delivered) and a recent one.
	for _, ev := range []struct {
		id, age, delivery string
	}{{"evt_old1", "40 days", "delivered"}, {"evt_old2", "40 days", "failed"}, {"evt_old3", "40 days", "pending"},
		{"evt_new", "1 day", "delivered"}} {
		db.Exec(t, `INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
			VALUES ($1, 'ten_acme', 'payment.succeeded', 'pay_1', '{}', now() - $2::interval)`, ev.id, ev.age)
		db.Exec(t, `WITH d AS (INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status, created_at)
			VALUES ('ten_acme', 'we_1', $1, $2, now() - $3::interval) RETURNING id)
			INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, event_id, attempt, duration_ms)
			SELECT id, 'we_1', $1, 1, 10 FROM d`, ev.id, ev.delivery, ev.age)
	}
	db.Exec(t, `INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext, expires_at) VALUES
		('we_1', '\x01', now() - interval '3 days'), ('we_1', '\x02', now() - interval '1 hour'), ('we_1', '\x03', NULL)`)

	deliveries, events, secrets, err := webhooks.Prune(t.Context(), db.Pool, webhooks.Retention{Events: 30 * 24 * time.Hour, Secrets: 24 * time.Hour}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if deliveries != 2 || events != 2 || secrets != 1 {
		t.Fatalf("pruned %d deliveries, %d events, %d secrets; want 2, 2, 1", deliveries, events, secrets)
	}
	if got := db.Count(t, `SELECT count(*) FROM events WHERE id IN ('evt_old3', 'evt_new')`); got != 2 {
		t.Fatalf("%d of the pending delivery's event and the recent one kept", got)
	}
	if got := db.Count(t, `SELECT count(*) FROM webhook_delivery_attempts`); got != 2 {
		t.Fatalf("%d attempts left, want the two of the deliveries kept", got)
	}
	if got := db.Count(t, `SELECT count(*) FROM webhook_endpoint_secrets`); got != 2 {
		t.Fatalf("%d secrets left, want the live one and the one expired an hour ago", got)
	}
}
