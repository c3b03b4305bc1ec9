package webhooks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/signing"
)

// DemoID is the id of the demo tenant's endpoint that SeedDemo makes.
const DemoID = "we_demoreceiver000000000000"

const seedEndpoint = `
INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, description, status, created_at, updated_at)
VALUES ($1, $2, $3, '{*}', 'The demo receiver of make run', 'enabled', now(), now())
ON CONFLICT (id) DO UPDATE SET url = excluded.url, status = 'enabled', disabled_reason = NULL, updated_at = now(),
	version = webhook_endpoints.version + 1, failing_since = NULL`

const replaceSecrets = `
WITH gone AS (DELETE FROM webhook_endpoint_secrets WHERE endpoint_id = $1)
INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext) VALUES ($1, $2)`

// SeedDemo gives tenantID the demo endpoint at url, every event, signed
// with secret: for make run's demo receiver, which holds the same secret.
// Running it again points the endpoint at url and secret again.
func SeedDemo(ctx context.Context, db *pgxpool.Pool, box signing.Box, tenantID, url, secret string) error {
	if _, err := signing.ParseSecrets(secret); err != nil || secret == "" {
		return fmt.Errorf("demo webhook secret: not a whsec_ secret")
	}
	sealed, err := box.Seal(DemoID, []byte(secret))
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, seedEndpoint, DemoID, tenantID, url); err != nil {
		return fmt.Errorf("seed demo endpoint: %w", err)
	}
	if _, err := tx.Exec(ctx, replaceSecrets, DemoID, sealed); err != nil {
		return fmt.Errorf("seed demo endpoint secret: %w", err)
	}
	return tx.Commit(ctx)
}
