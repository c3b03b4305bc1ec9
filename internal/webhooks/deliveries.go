package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Delivery statuses: pending until a 2xx (delivered), or until the schedule
// is spent, the receiver answered 410 or the endpoint was disabled (failed).
const (
	DeliveryPending   = client.DeliveryPending
	DeliveryDelivered = client.DeliveryDelivered
	DeliveryFailed    = client.DeliveryFailed
)

// Delivery is one event's delivery to one endpoint, as the API shows it:
// the client's type, so that the two cannot drift apart.
type Delivery = client.WebhookDelivery

// storedDelivery is the delivery d with status.
func storedDelivery(d Delivery, status int) idempotency.Response {
	return render.Stored(status, "application/json", Resource.Path+"/"+d.Endpoint+"/deliveries", render.Encode(d))
}

// Attempt is one line of an endpoint's delivery log, as the API shows it.
type Attempt = client.WebhookDeliveryAttempt

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

// Notify implements operation.Subscribers: the deliveries' insert is queued
// in tx, and the function returned inserts their jobs once it is read.
func (f FanOut) Notify(tx *database.Tx, tenantID, eventID, eventType string) func(context.Context) error {
	var (
		ids  []int64
		read bool
	)
	b := &pgx.Batch{}
	b.Queue(fanOut, tenantID, eventID, eventType).Query(func(rows pgx.Rows) error {
		var err error
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		read = true
		return err
	})
	tx.Queue(b)
	return func(ctx context.Context) error {
		if !read {
			if err := tx.Flush(ctx); err != nil {
				return fmt.Errorf("fan out event: %w", err)
			}
		}
		return enqueue(ctx, f.Jobs, tx, ids...)
	}
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
RETURNING id, public_id, status, attempts, created_at, delivered_at`

// Resend delivers one of the tenant's events to its endpoint id again,
// under req's key, once earlier attempts are over (delivered or failed;
// ErrDeliveryInFlight while they go on), and answers 202 with the delivery.
// The receiver may get it twice, which its dedupe by webhook-id makes once.
func (s *Service) Resend(ctx context.Context, req idempotency.Request, id string, r Resend) (idempotency.Lease, error) {
	if r.Event == "" {
		return idempotency.Lease{}, operation.Invalid([]operation.FieldError{{Field: "event", Message: "is required: an event id"}})
	}
	return s.Ops.Start(ctx, req, operation.Steps{Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
		e, err := lockEnabled(ctx, tx, req.TenantID, id)
		if err != nil {
			return operation.Plan{}, err
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
		err = tx.QueryRow(ctx, resendDelivery, req.TenantID, e.ID, r.Event).Scan(&n, &d.ID, &d.Status, &d.Attempts, &d.CreatedAt, &d.DeliveredAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return operation.Plan{}, ErrDeliveryInFlight
		}
		if err != nil {
			return operation.Plan{}, fmt.Errorf("resend: %w", err)
		}
		d.CreatedAt = d.CreatedAt.UTC()
		if err := enqueue(ctx, s.Jobs, tx, n); err != nil {
			return operation.Plan{}, err
		}
		return operation.Plan{Resource: idempotency.ResourceRef{Type: Resource.Type, ID: e.ID},
			Response: func() idempotency.Response { return storedDelivery(d, 202) }}, nil
	}})
}

// Recovery is the request to resend an endpoint's failed deliveries.
type Recovery struct {
	// Since is the oldest delivery's time of creation to resend.
	Since *time.Time `json:"since"`
}

// Recovered is the answer to a recovery.
type Recovered struct {
	Object   string    `json:"object"`
	Endpoint string    `json:"endpoint"`
	Since    time.Time `json:"since"`
	// Resent is how many failed deliveries start a new chain of attempts.
	Resent int `json:"resent"`
	// HasMore is whether failed deliveries since then are left, past the
	// RecoverMax of one recovery: another recovery resends them.
	HasMore bool `json:"has_more"`
}

// RecoverMax bounds the deliveries one recovery resends, and so the length
// of its transaction.
const RecoverMax = 1000

// recoverDeliveries starts a new chain on the endpoint's oldest failed
// deliveries created since $2, as a resend does.
const recoverDeliveries = `
WITH failed AS (
	SELECT id FROM webhook_deliveries
	WHERE endpoint_id = $1 AND status = 'failed' AND created_at >= $2
	ORDER BY id LIMIT $3
	FOR UPDATE)
UPDATE webhook_deliveries d
SET status = 'pending', attempts = 0, chain = d.chain + 1, delivered_at = NULL, updated_at = now()
FROM failed WHERE d.id = failed.id
RETURNING d.id`

const failedSince = `
SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'failed' AND created_at >= $2)`

// Recover resends, under req's key, every failed delivery to the tenant's
// endpoint id created since r.Since (RecoverMax at a time), each as a
// resend would, and answers 202 with how many. The endpoint must be enabled.
func (s *Service) Recover(ctx context.Context, req idempotency.Request, id string, r Recovery) (idempotency.Lease, error) {
	switch {
	case r.Since == nil:
		return idempotency.Lease{}, operation.Invalid([]operation.FieldError{{Field: "since", Message: "is required: an RFC 3339 time"}})
	case r.Since.After(time.Now()):
		return idempotency.Lease{}, operation.Invalid([]operation.FieldError{{Field: "since", Message: "is in the future"}})
	}
	return s.Ops.Start(ctx, req, operation.Steps{Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
		e, err := lockEnabled(ctx, tx, req.TenantID, id)
		if err != nil {
			return operation.Plan{}, err
		}
		rows, err := tx.Query(ctx, recoverDeliveries, e.ID, *r.Since, RecoverMax)
		if err != nil {
			return operation.Plan{}, fmt.Errorf("recover: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return operation.Plan{}, fmt.Errorf("recover: %w", err)
		}
		out := Recovered{Object: "webhook_recovery", Endpoint: e.ID, Since: r.Since.UTC(), Resent: len(ids)}
		if err := tx.QueryRow(ctx, failedSince, e.ID, *r.Since).Scan(&out.HasMore); err != nil {
			return operation.Plan{}, fmt.Errorf("recover: %w", err)
		}
		if err := enqueue(ctx, s.Jobs, tx, ids...); err != nil {
			return operation.Plan{}, err
		}
		return operation.Plan{Resource: idempotency.ResourceRef{Type: Resource.Type, ID: e.ID},
			Response: func() idempotency.Response {
				return render.Stored(202, "application/json", Resource.Path+"/"+e.ID+"/deliveries", render.Encode(out))
			}}, nil
	}})
}

// lockEnabled locks the tenant's endpoint id, as lock does, and refuses one
// that is disabled (ErrDisabled): resends and recoveries go to an enabled
// endpoint only.
func lockEnabled(ctx context.Context, tx pgx.Tx, tenantID, id string) (Endpoint, error) {
	e, err := lock(ctx, tx, tenantID, id)
	if err == nil && e.Status != StatusEnabled {
		err = ErrDisabled
	}
	return e, err
}

// Attempt outcomes, which the delivery log filters by.
const (
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
)

// LogFilter narrows the delivery log; an empty field does not.
type LogFilter struct {
	// Status is an attempt's outcome: succeeded (a 2xx) or failed.
	Status string
	// Type is the event's type.
	Type string
}

// check refuses a filter that names no outcome or no event type.
func (s *Service) check(f LogFilter) error {
	if f.Status != "" && f.Status != AttemptSucceeded && f.Status != AttemptFailed {
		return &render.InvalidRequestError{Detail: "status must be succeeded or failed."}
	}
	if f.Type != "" && !slices.Contains(s.EventTypes, f.Type) {
		return &render.InvalidRequestError{Detail: fmt.Sprintf("type must be an event type: one of %v.", s.EventTypes)}
	}
	return nil
}

const listAttempts = `
SELECT a.public_id, d.public_id, a.event_id, a.attempt, a.status_code, a.duration_ms, a.error, a.next_retry_at, a.created_at
FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
WHERE a.endpoint_id = $1
	AND ($2::text IS NULL OR a.id < (SELECT id FROM webhook_delivery_attempts WHERE endpoint_id = $1 AND public_id = $2))
	AND ($4::text IS NULL OR (coalesce(a.status_code BETWEEN 200 AND 299, false)) = ($4 = 'succeeded'))
	AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id AND e.type = $5))
ORDER BY a.id DESC
LIMIT $3`

const attemptOfEndpoint = `SELECT 1 FROM webhook_delivery_attempts WHERE endpoint_id = $1 AND public_id = $2`

// Log returns up to limit lines of the delivery log of the tenant's endpoint
// id that pass f, newest first, starting after the attempt startingAfter
// when it is not empty.
func (s *Service) Log(ctx context.Context, tenantID, id string, f LogFilter, limit int, startingAfter string) ([]Attempt, bool, error) {
	if err := s.check(f); err != nil {
		return nil, false, err
	}
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return nil, false, err
	}
	if err := exists(ctx, s.Ops.DB, attemptOfEndpoint, "wha_", id, startingAfter); err != nil {
		return nil, false, err
	}
	return operation.Page(ctx, s.Ops.DB, listAttempts, limit, func(row pgx.CollectableRow) (Attempt, error) {
		a := Attempt{Object: "webhook_delivery_attempt"}
		err := row.Scan(&a.ID, &a.Delivery, &a.Event, &a.Attempt, &a.StatusCode, &a.DurationMS, &a.Error, &a.NextRetryAt, &a.CreatedAt)
		a.CreatedAt = a.CreatedAt.UTC()
		return a, err
	}, id, nullable(startingAfter), limit+1, nullable(f.Status), nullable(f.Type))
}

const listEventDeliveries = `
SELECT d.public_id, d.endpoint_id, d.event_id, d.status, d.attempts, d.created_at, d.delivered_at
FROM webhook_deliveries d
WHERE d.tenant_id = $1 AND d.event_id = $2
	AND ($3::text IS NULL OR d.id < (SELECT id FROM webhook_deliveries WHERE event_id = $2 AND public_id = $3))
ORDER BY d.id DESC
LIMIT $4`

const deliveryOfEvent = `SELECT 1 FROM webhook_deliveries WHERE event_id = $1 AND public_id = $2`

// EventDeliveries returns up to limit of the deliveries of the tenant's
// event id, one per endpoint that wanted it, newest first, starting after
// the delivery startingAfter when it is not empty.
func (s *Service) EventDeliveries(ctx context.Context, tenantID, id string, limit int, startingAfter string) ([]Delivery, bool, error) {
	if _, err := s.Ops.GetEvent(ctx, tenantID, id); err != nil {
		return nil, false, err
	}
	if err := exists(ctx, s.Ops.DB, deliveryOfEvent, "whd_", id, startingAfter); err != nil {
		return nil, false, err
	}
	return operation.Page(ctx, s.Ops.DB, listEventDeliveries, limit, func(row pgx.CollectableRow) (Delivery, error) {
		d := Delivery{Object: "webhook_delivery"}
		err := row.Scan(&d.ID, &d.Endpoint, &d.Event, &d.Status, &d.Attempts, &d.CreatedAt, &d.DeliveredAt)
		d.CreatedAt = d.CreatedAt.UTC()
		return d, err
	}, tenantID, id, nullable(startingAfter), limit+1)
}

// exists checks that the page's starting point, when there is one, is an
// id of the list's (prefix, under parent): ErrNotFound otherwise.
func exists(ctx context.Context, db database.DBTX, sql, prefix, parent, startingAfter string) error {
	if startingAfter == "" {
		return nil
	}
	if !operation.ValidID(prefix, startingAfter) {
		return ErrNotFound
	}
	var one int
	err := db.QueryRow(ctx, sql, parent, startingAfter).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// nullable is s, or SQL's null when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const oldestUndelivered = `
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM webhook_deliveries WHERE status = 'pending'`

// OldestUndelivered is the age of the oldest pending delivery, by the
// database's clock; zero when there is none.
func OldestUndelivered(ctx context.Context, db database.DBTX) (time.Duration, error) {
	return database.Age(ctx, db, oldestUndelivered)
}
