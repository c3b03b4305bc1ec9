package endpoints

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
)

// Delivery statuses: pending until a 2xx (delivered), or until the schedule
// is spent, the receiver answered 410 or the endpoint was disabled (failed).
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Delivery is one event's delivery to one endpoint.
type Delivery struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Endpoint    string     `json:"endpoint"`
	Event       string     `json:"event"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

// Attempt is one line of an endpoint's delivery log.
type Attempt struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"`
	Delivery    string     `json:"delivery"`
	Event       string     `json:"event"`
	Attempt     int        `json:"attempt"`
	StatusCode  *int       `json:"status_code"`
	DurationMS  int        `json:"duration_ms"`
	Error       *string    `json:"error"`
	NextRetryAt *time.Time `json:"next_retry_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

// deliveryID and attemptID show the internal numbers as ids.
func deliveryID(n int64) string { return "whd_" + strconv.FormatInt(n, 10) }
func attemptID(n int64) string  { return "wha_" + strconv.FormatInt(n, 10) }

// parseNumber reads the number of an id made by deliveryID or attemptID.
func parseNumber(prefix, id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// fanOut writes a delivery of the event to every enabled endpoint of the
// tenant that wants its type, in the transaction that stages the event.
const fanOut = `
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status)
SELECT $1, e.id, $2, 'pending' FROM webhook_endpoints e
WHERE e.tenant_id = $1 AND e.status = 'enabled' AND ($3 = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events))
RETURNING id`

// FanOut implements operation.Subscribers: the event's deliveries and their
// jobs are written in tx, the transaction that stages the event, so that a
// delivery exists exactly when its event does.
type FanOut struct{ Jobs Jobs }

// Notify implements operation.Subscribers.
func (f FanOut) Notify(ctx context.Context, tx pgx.Tx, tenantID, eventID, eventType string) error {
	rows, err := tx.Query(ctx, fanOut, tenantID, eventID, eventType)
	if err != nil {
		return fmt.Errorf("fan out event: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("fan out event: %w", err)
	}
	for _, id := range ids {
		if err := f.Jobs.EnqueueDelivery(ctx, tx, id); err != nil {
			return err
		}
	}
	return nil
}

const eventOfTenant = `SELECT type FROM events WHERE tenant_id = $1 AND id = $2`

// resendDelivery starts a new chain of the event's delivery to the
// endpoint: the delivery is pending again, its attempts counted from zero in
// the new chain. A delivery still pending has a chain under way, and is left
// alone (no row): one chain per delivery.
const resendDelivery = `
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status)
VALUES ($1, $2, $3, 'pending')
ON CONFLICT (event_id, endpoint_id) DO UPDATE
SET status = 'pending', attempts = 0, chain = webhook_deliveries.chain + 1, delivered_at = NULL, updated_at = now()
WHERE webhook_deliveries.status <> 'pending'
RETURNING id, status, attempts, created_at, delivered_at`

// Resend delivers one of the tenant's events to its endpoint id again,
// under req's key, once earlier attempts are over (delivered or failed;
// ErrDeliveryInFlight while they go on), and answers 202 with the delivery. The receiver may get it twice, which its dedupe by
// webhook-id makes once.
func (s *Service) Resend(ctx context.Context, req idempotency.Request, id string, r Resend) (idempotency.Lease, error) {
	if r.Event == "" {
		return idempotency.Lease{}, operation.Invalid([]operation.FieldError{{Field: "event", Message: "is required: an event id"}})
	}
	return s.Ops.Start(ctx, req, operation.Steps{Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
		e, err := lock(ctx, tx, req.TenantID, id)
		if err != nil {
			return operation.Plan{}, err
		}
		if e.Status != StatusEnabled {
			return operation.Plan{}, ErrDisabled
		}
		var typ string
		if !operation.ValidID("evt_", r.Event) {
			return operation.Plan{}, operation.ErrEventNotFound
		}
		if err := tx.QueryRow(ctx, eventOfTenant, req.TenantID, r.Event).Scan(&typ); errors.Is(err, pgx.ErrNoRows) {
			return operation.Plan{}, operation.ErrEventNotFound
		} else if err != nil {
			return operation.Plan{}, fmt.Errorf("get event: %w", err)
		}
		d := Delivery{Object: "webhook_delivery", Endpoint: e.ID, Event: r.Event}
		var n int64
		err = tx.QueryRow(ctx, resendDelivery, req.TenantID, e.ID, r.Event).Scan(&n, &d.Status, &d.Attempts, &d.CreatedAt, &d.DeliveredAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return operation.Plan{}, ErrDeliveryInFlight
		}
		if err != nil {
			return operation.Plan{}, fmt.Errorf("resend: %w", err)
		}
		d.ID, d.CreatedAt = deliveryID(n), d.CreatedAt.UTC()
		if err := s.Jobs.EnqueueDelivery(ctx, tx, n); err != nil {
			return operation.Plan{}, err
		}
		return operation.Plan{Resource: idempotency.Resource{Type: Resource.Type, ID: e.ID},
			Response: func() idempotency.Response { return d.stored(202) }}, nil
	}})
}

const listAttempts = `
SELECT a.id, a.delivery_id, a.event_id, a.attempt, a.status_code, a.duration_ms, a.error, a.next_retry_at, a.created_at
FROM webhook_delivery_attempts a
WHERE a.endpoint_id = $1 AND ($2::bigint IS NULL OR a.id < $2)
ORDER BY a.id DESC
LIMIT $3`

// Log returns up to limit lines of the delivery log of the tenant's endpoint
// id, newest first, starting after the attempt startingAfter when it is not
// empty.
func (s *Service) Log(ctx context.Context, tenantID, id string, limit int, startingAfter string) ([]Attempt, bool, error) {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return nil, false, err
	}
	var after *int64
	if startingAfter != "" {
		n, ok := parseNumber("wha_", startingAfter)
		if !ok {
			return nil, false, ErrNotFound
		}
		after = &n
	}
	rows, err := s.Ops.DB.Query(ctx, listAttempts, id, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("delivery log: %w", err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		a := Attempt{Object: "webhook_delivery_attempt"}
		var n, delivery int64
		err := row.Scan(&n, &delivery, &a.Event, &a.Attempt, &a.StatusCode, &a.DurationMS, &a.Error, &a.NextRetryAt, &a.CreatedAt)
		a.ID, a.Delivery, a.CreatedAt = attemptID(n), deliveryID(delivery), a.CreatedAt.UTC()
		return a, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("delivery log: %w", err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

const oldestUndelivered = `
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM webhook_deliveries WHERE status = 'pending'`

// OldestUndelivered is the age of the oldest pending delivery, by the
// database's clock; zero when there is none.
func OldestUndelivered(ctx context.Context, db database.DBTX) (time.Duration, error) {
	return database.Age(ctx, db, oldestUndelivered)
}
