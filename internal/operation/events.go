package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrEventNotFound reports an event that does not exist for the tenant.
var ErrEventNotFound = NotFound("event")

// Event is an immutable record of something that happened to a resource,
// staged by the phase that finished it.
type Event struct {
	ID        string       `json:"id"`
	Object    string       `json:"object"`
	Type      string       `json:"type"`
	Data      EventData    `json:"data"`
	Request   EventRequest `json:"request"`
	CreatedAt time.Time    `json:"created_at"`
}

// EventRequest is the API request that caused an event, as Stripe's events
// name it: the request's id (X-Request-Id) and its Idempotency-Key. Both are
// null for an event no request of this API caused.
type EventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// EventData holds the resource as it was when the event happened.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

const getEvent = `SELECT id FROM events WHERE tenant_id = $1 AND id = $2`

const getWholeEvent = `SELECT id, type, data, request_id, request_idempotency_key, created_at FROM events WHERE tenant_id = $1 AND id = $2`

// GetEvent returns the tenant's event, or ErrEventNotFound.
func (s *Service) GetEvent(ctx context.Context, tenantID, id string) (Event, error) {
	if !ValidID("evt_", id) {
		return Event{}, ErrEventNotFound
	}
	e, err := scanEvent(s.DB.QueryRow(ctx, getWholeEvent, tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, ErrEventNotFound
	}
	if err != nil {
		return Event{}, fmt.Errorf("get event: %w", err)
	}
	return e, nil
}

// scanEvent reads an event's id, type, data, request and time.
func scanEvent(row pgx.Row) (Event, error) {
	e := Event{Object: "event"}
	err := row.Scan(&e.ID, &e.Type, &e.Data.Object, &e.Request.ID, &e.Request.IdempotencyKey, &e.CreatedAt)
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

const listEvents = `
SELECT id, type, data, request_id, request_idempotency_key, created_at FROM events
WHERE tenant_id = $1
	AND ($2::text IS NULL OR (created_at, id) < (SELECT created_at, id FROM events WHERE tenant_id = $1 AND id = $2))
ORDER BY created_at DESC, id DESC
LIMIT $3`

// ListEvents returns up to limit of the tenant's events, newest first,
// starting after the event startingAfter when it is not empty.
func (s *Service) ListEvents(ctx context.Context, tenantID string, limit int, startingAfter string) ([]Event, bool, error) {
	if startingAfter != "" {
		if !ValidID("evt_", startingAfter) {
			return nil, false, ErrEventNotFound
		}
		var id string
		err := s.DB.QueryRow(ctx, getEvent, tenantID, startingAfter).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, ErrEventNotFound
		}
		if err != nil {
			return nil, false, fmt.Errorf("get event: %w", err)
		}
	}
	return ListPage(ctx, s.DB, listEvents, tenantID, startingAfter, limit, func(row pgx.CollectableRow) (Event, error) {
		return scanEvent(row)
	})
}
