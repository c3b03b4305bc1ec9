package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/example/payments/internal/database"
)

// Retention is how long the webhooks' records are kept: events (and their
// deliveries and attempts, once over) for Events, a secret for Secrets past
// its expiry.
type Retention struct {
	Events, Secrets time.Duration
}

// The pruning statements, each one batch ($1) of the oldest rows past their
// retention ($2), by the database's clock. A delivery still pending is kept,
// and so is its event; attempts go with their delivery (ON DELETE CASCADE).
const (
	pruneDeliveries = `
DELETE FROM webhook_deliveries WHERE id IN (
	SELECT id FROM webhook_deliveries
	WHERE status <> 'pending' AND created_at < now() - $2::interval
	ORDER BY created_at
	LIMIT $1)`
	pruneEvents = `
DELETE FROM events WHERE id IN (
	SELECT e.id FROM events e
	WHERE e.created_at < now() - $2::interval
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
	ORDER BY e.created_at
	LIMIT $1)`
	pruneSecrets = `
DELETE FROM webhook_endpoint_secrets WHERE id IN (
	SELECT id FROM webhook_endpoint_secrets
	WHERE expires_at < now() - $2::interval
	ORDER BY expires_at
	LIMIT $1)`
)

// Prune deletes, batch rows at a time, what is past r: deliveries that are
// over, with their attempts, then events no delivery needs, then expired
// secrets. It returns how many rows of each it deleted.
func Prune(ctx context.Context, db database.DBTX, r Retention, batch int) (deliveries, events, secrets int, err error) {
	if deliveries, err = database.InBatches(ctx, db, pruneDeliveries, batch, r.Events); err != nil {
		return deliveries, 0, 0, fmt.Errorf("prune deliveries: %w", err)
	}
	if events, err = database.InBatches(ctx, db, pruneEvents, batch, r.Events); err != nil {
		return deliveries, events, 0, fmt.Errorf("prune events: %w", err)
	}
	if secrets, err = database.InBatches(ctx, db, pruneSecrets, batch, r.Secrets); err != nil {
		return deliveries, events, secrets, fmt.Errorf("prune secrets: %w", err)
	}
	return deliveries, events, secrets, nil
}
