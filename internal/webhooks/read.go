package webhooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/operation"
)

// endpointColumns are read by every query of one endpoint.
const endpointColumns = `id, tenant_id, url, enabled_events, description, status, disabled_reason, created_at, updated_at`

const getEndpoint = `SELECT ` + endpointColumns + ` FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`

const lockEndpoint = getEndpoint + ` FOR UPDATE`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	e.Object = Resource.Type
	err := row.Scan(&e.ID, &e.TenantID, &e.URL, &e.EnabledEvents, &e.Description, &e.Status, &e.DisabledReason, &e.CreatedAt, &e.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("scan endpoint: %w", err)
	}
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return e, nil
}

// Get returns the tenant's endpoint, or ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id string) (Endpoint, error) {
	if !operation.ValidID(Resource.Prefix, id) {
		return Endpoint{}, ErrNotFound
	}
	return scanEndpoint(s.Ops.DB.QueryRow(ctx, getEndpoint, tenantID, id))
}

// lock reads and locks the tenant's endpoint in tx, or returns ErrNotFound.
func lock(ctx context.Context, tx pgx.Tx, tenantID, id string) (Endpoint, error) {
	if !operation.ValidID(Resource.Prefix, id) {
		return Endpoint{}, ErrNotFound
	}
	return scanEndpoint(tx.QueryRow(ctx, lockEndpoint, tenantID, id))
}

const listEndpoints = `
SELECT ` + endpointColumns + ` FROM webhook_endpoints
WHERE tenant_id = $1
	AND ($2::text IS NULL OR (created_at, id) < (SELECT created_at, id FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2))
ORDER BY created_at DESC, id DESC
LIMIT $3`

// List returns up to limit of the tenant's endpoints, newest first,
// starting after the endpoint startingAfter when it is not empty.
func (s *Service) List(ctx context.Context, tenantID string, limit int, startingAfter string) ([]Endpoint, bool, error) {
	if startingAfter != "" {
		if _, err := s.Get(ctx, tenantID, startingAfter); err != nil {
			return nil, false, err
		}
	}
	return operation.ListPage(ctx, s.Ops.DB, listEndpoints, tenantID, startingAfter, limit,
		func(row pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(row) })
}
