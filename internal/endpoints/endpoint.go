// Package endpoints is the tenants' webhook endpoints: registering,
// changing and removing them, their signing secrets (encrypted at rest,
// rotated with a grace period), and delivering every event to each enabled
// endpoint that wants it through the outbox: a delivery is written, with its
// job, in the transaction that writes the event, and the job POSTs it, signed
// as Standard Webhooks specifies, retrying on a schedule, through a client
// that cannot reach the inside network.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/webhook"
)

// ResourceType names endpoints as the resource of an idempotency key.
const ResourceType = "webhook_endpoint"

// Endpoint statuses.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
)

// EventTypes are the event types an endpoint may ask for; "*" asks for all.
var EventTypes = []string{"payment.succeeded", "payment.failed", "refund.succeeded", "refund.failed"}

// Limits of an endpoint's fields.
const (
	MaxDescription   = 1000
	MaxEnabledEvents = 16
	// DefaultGrace is how long a rotated-out secret still signs, unless the
	// rotation says otherwise; MaxGrace bounds what it may say.
	DefaultGrace = 24 * time.Hour
	MaxGrace     = 7 * 24 * time.Hour
)

var (
	// ErrNotFound reports an endpoint that does not exist for the tenant.
	ErrNotFound = errors.New("webhook endpoint not found")
	// ErrDisabled reports a resend to a disabled endpoint.
	ErrDisabled = errors.New("the webhook endpoint is disabled")
)

// Endpoint is a tenant's webhook endpoint.
type Endpoint struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
	Status        string   `json:"status"`
	// DisabledReason is by_tenant, or gone when the receiver answered 410.
	DisabledReason *string   `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// Secret is shown once: in the answer that made it (create, rotate),
	// never stored in the clear, never replayed.
	Secret string `json:"secret,omitempty"`

	TenantID string `json:"-"`
}

// NewEndpoint is the request to register an endpoint.
type NewEndpoint struct {
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
}

// Update is the request to change an endpoint; absent fields stay.
type Update struct {
	URL           *string  `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
	// Status is enabled or disabled.
	Status *string `json:"status"`
}

// Rotation is the request to rotate an endpoint's secret.
type Rotation struct {
	// ExpireCurrentSecretIn is how many seconds the current secret still
	// signs, alongside the new one (default a day, at most a week; 0 stops
	// it at once).
	ExpireCurrentSecretIn *int64 `json:"expire_current_secret_in"`
}

// Resend is the request to deliver one event to one endpoint again.
type Resend struct {
	Event string `json:"event"`
}

// Renderer turns endpoints and deliveries into the final responses stored on
// idempotency keys (package render).
type Renderer interface {
	Endpoint(status int, e Endpoint) idempotency.Response
	Delivery(status int, d Delivery) idempotency.Response
}

// Jobs stages the job of a delivery in the transaction that writes it.
type Jobs interface {
	EnqueueDelivery(ctx context.Context, tx pgx.Tx, deliveryID int64) error
}

// Service manages the tenants' endpoints.
type Service struct {
	DB     *pgxpool.Pool
	Keys   *idempotency.Store
	Render Renderer
	Jobs   Jobs
	// Policy decides which URLs may be registered.
	Policy safehttp.Policy
	Cipher webhook.Box
}

// check validates what can be checked without the network, adding to errs.
func checkFields(url *string, events []string, eventsRequired bool, description *string, status *string) []payments.FieldError {
	var errs []payments.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, payments.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if url != nil && (*url == "" || !payments.Storable(*url)) {
		add("url", "is required, an https URL")
	}
	switch {
	case events == nil && eventsRequired:
		add("enabled_events", `is required: event types, or ["*"] for all`)
	case events != nil && (len(events) == 0 || len(events) > MaxEnabledEvents):
		add("enabled_events", "must list 1 to %d event types", MaxEnabledEvents)
	}
	for _, t := range events {
		if t != "*" && !slices.Contains(EventTypes, t) {
			add("enabled_events", "%q is not an event type: use %v or \"*\"", t, EventTypes)
			break
		}
	}
	if description != nil && (utf8.RuneCountInString(*description) > MaxDescription || !payments.Storable(*description)) {
		add("description", "must be valid text of at most %d characters", MaxDescription)
	}
	if status != nil && *status != StatusEnabled && *status != StatusDisabled {
		add("status", "must be enabled or disabled")
	}
	return errs
}

// checkURL resolves url and refuses one that is not https or reaches a
// private network (see safehttp).
func (s *Service) checkURL(ctx context.Context, raw string) (string, error) {
	normal, err := s.Policy.CheckURL(ctx, raw)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", err // the lookup's failure, not the URL's
	}
	if err != nil {
		return "", &payments.ValidationError{Fields: []payments.FieldError{{Field: "url", Message: err.Error()}}}
	}
	return normal, nil
}

func invalid(errs []payments.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &payments.ValidationError{Fields: errs}
}

// begin looks req's key up and, when it is new, checks rawURL (when not
// nil) and opens the transaction of its first (and only) phase. A lease
// without a transaction is the answer: a replay, or the key held by another
// request. The URL is resolved after the lookup, so that a replay never
// depends on DNS, and before the transaction, so that no connection or
// lock is held across the lookup; its normal form replaces it.
func (s *Service) begin(ctx context.Context, req idempotency.Request, rawURL *string) (idempotency.Lease, pgx.Tx, error) {
	lease, err := s.Keys.Lookup(ctx, req)
	if !errors.Is(err, idempotency.ErrNotFound) {
		return lease, nil, err
	}
	if rawURL != nil {
		if *rawURL, err = s.checkURL(ctx, *rawURL); err != nil {
			return idempotency.Lease{}, nil, err
		}
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return idempotency.Lease{}, nil, fmt.Errorf("begin: %w", err)
	}
	return idempotency.Lease{}, tx, nil
}

// finish reserves req's key in tx, in one batch with the statements write
// queues, and stores resp as the key's final response, then commits. Created
// false means another request reserved the key first: the caller's deferred
// rollback undoes the writes, and the request is answered for that key.
func (s *Service) finish(ctx context.Context, tx pgx.Tx, req idempotency.Request, res idempotency.Resource, write func(*pgx.Batch), resp func() idempotency.Response) (idempotency.Lease, error) {
	batch := &pgx.Batch{}
	key := s.Keys.Reserve(batch, req, res)
	write(batch)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return idempotency.Lease{}, fmt.Errorf("reserve key: %w", err)
	}
	lease, err := key.Lease(ctx, tx)
	if err != nil || !lease.Created {
		return lease, err
	}
	if lease, err = s.Keys.FinishNow(ctx, tx, lease, resp()); err != nil {
		return idempotency.Lease{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return idempotency.Lease{}, fmt.Errorf("commit: %w", err)
	}
	return lease, nil
}

const insertEndpoint = `
INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, description, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'enabled', $6, $6)`

const insertSecret = `
INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext) VALUES ($1, $2)`

// Create registers an endpoint under req's key, with a fresh secret, and
// returns it with the secret: the only time it is shown. Its stored
// response, which replays answer, has no secret.
func (s *Service) Create(ctx context.Context, req idempotency.Request, ne NewEndpoint) (idempotency.Lease, *Endpoint, error) {
	if err := invalid(checkFields(&ne.URL, ne.EnabledEvents, true, ne.Description, nil)); err != nil {
		return idempotency.Lease{}, nil, err
	}
	lease, tx, err := s.begin(ctx, req, &ne.URL)
	if tx == nil {
		return lease, nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := Endpoint{ID: payments.NewID("we_"), Object: "webhook_endpoint", URL: ne.URL, EnabledEvents: ne.EnabledEvents,
		Description: ne.Description, Status: StatusEnabled, CreatedAt: now, UpdatedAt: now, TenantID: req.TenantID}
	secret := webhook.NewSecret()
	sealed, err := s.Cipher.Seal(e.ID, []byte(secret))
	if err != nil {
		return idempotency.Lease{}, nil, err
	}
	lease, err = s.finish(ctx, tx, req, idempotency.Resource{Type: ResourceType, ID: e.ID},
		func(b *pgx.Batch) {
			b.Queue(insertEndpoint, e.ID, e.TenantID, e.URL, e.EnabledEvents, e.Description, now)
			b.Queue(insertSecret, e.ID, sealed)
		},
		func() idempotency.Response { return s.Render.Endpoint(201, e) })
	if err != nil || !lease.Created {
		return lease, nil, err
	}
	e.Secret = secret
	return lease, &e, nil
}

// endpointColumns are read by every query of one endpoint.
const endpointColumns = `id, tenant_id, url, enabled_events, description, status, disabled_reason, created_at, updated_at`

const getEndpoint = `SELECT ` + endpointColumns + ` FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`

const lockEndpoint = getEndpoint + ` FOR UPDATE`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	e := Endpoint{Object: "webhook_endpoint"}
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
	if !payments.ValidID("we_", id) {
		return Endpoint{}, ErrNotFound
	}
	return scanEndpoint(s.DB.QueryRow(ctx, getEndpoint, tenantID, id))
}

// lock reads and locks the tenant's endpoint in tx, or returns ErrNotFound.
func lock(ctx context.Context, tx pgx.Tx, tenantID, id string) (Endpoint, error) {
	if !payments.ValidID("we_", id) {
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
	var after *string
	if startingAfter != "" {
		if _, err := s.Get(ctx, tenantID, startingAfter); err != nil {
			return nil, false, err
		}
		after = &startingAfter
	}
	rows, err := s.DB.Query(ctx, listEndpoints, tenantID, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list endpoints: %w", err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(row) })
	if err != nil {
		return nil, false, fmt.Errorf("list endpoints: %w", err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

const updateEndpoint = `
UPDATE webhook_endpoints
SET url = $2, enabled_events = $3, description = $4, status = $5, disabled_reason = $6, updated_at = $7
WHERE id = $1`

// Update changes the tenant's endpoint id under req's key. A disabled
// endpoint gets no new deliveries; enabling it again gets it the events
// staged from then on.
func (s *Service) Update(ctx context.Context, req idempotency.Request, id string, u Update) (idempotency.Lease, error) {
	if err := invalid(checkFields(u.URL, u.EnabledEvents, false, u.Description, u.Status)); err != nil {
		return idempotency.Lease{}, err
	}
	lease, tx, err := s.begin(ctx, req, u.URL)
	if tx == nil {
		return lease, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	e, err := lock(ctx, tx, req.TenantID, id)
	if err != nil {
		return idempotency.Lease{}, err
	}
	if u.URL != nil {
		e.URL = *u.URL
	}
	if u.EnabledEvents != nil {
		e.EnabledEvents = u.EnabledEvents
	}
	if u.Description != nil {
		e.Description = u.Description
	}
	if u.Status != nil && *u.Status != e.Status {
		e.Status, e.DisabledReason = *u.Status, nil
		if e.Status == StatusDisabled {
			reason := "by_tenant"
			e.DisabledReason = &reason
		}
	}
	e.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
	return s.finish(ctx, tx, req, idempotency.Resource{Type: ResourceType, ID: e.ID},
		func(b *pgx.Batch) {
			b.Queue(updateEndpoint, e.ID, e.URL, e.EnabledEvents, e.Description, e.Status, e.DisabledReason, e.UpdatedAt)
		},
		func() idempotency.Response { return s.Render.Endpoint(200, e) })
}

// retireSecrets makes the endpoint's current secrets expire after the grace
// period $2 at the latest (database clock): they sign, with the new one,
// until then.
const retireSecrets = `
UPDATE webhook_endpoint_secrets SET expires_at = now() + $2::interval
WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now() + $2::interval)`

// RotateSecret gives the tenant's endpoint id a new secret under req's key
// and returns the endpoint with it, the only time it is shown. The current
// secret still signs, alongside the new one, for the grace period the
// rotation asks (a day by default), so that the receiver can switch without
// refusing a delivery.
func (s *Service) RotateSecret(ctx context.Context, req idempotency.Request, id string, r Rotation) (idempotency.Lease, *Endpoint, error) {
	grace := DefaultGrace
	if r.ExpireCurrentSecretIn != nil {
		if *r.ExpireCurrentSecretIn < 0 || *r.ExpireCurrentSecretIn > int64(MaxGrace/time.Second) {
			return idempotency.Lease{}, nil, invalid([]payments.FieldError{{Field: "expire_current_secret_in",
				Message: fmt.Sprintf("must be 0 to %d seconds", int64(MaxGrace/time.Second))}})
		}
		grace = time.Duration(*r.ExpireCurrentSecretIn) * time.Second
	}
	lease, tx, err := s.begin(ctx, req, nil)
	if tx == nil {
		return lease, nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	e, err := lock(ctx, tx, req.TenantID, id)
	if err != nil {
		return idempotency.Lease{}, nil, err
	}
	secret := webhook.NewSecret()
	sealed, err := s.Cipher.Seal(e.ID, []byte(secret))
	if err != nil {
		return idempotency.Lease{}, nil, err
	}
	lease, err = s.finish(ctx, tx, req, idempotency.Resource{Type: ResourceType, ID: e.ID},
		func(b *pgx.Batch) {
			b.Queue(retireSecrets, e.ID, grace)
			b.Queue(insertSecret, e.ID, sealed)
		},
		func() idempotency.Response { return s.Render.Endpoint(200, e) })
	if err != nil || !lease.Created {
		return lease, nil, err
	}
	e.Secret = secret
	return lease, &e, nil
}

const deleteEndpoint = `DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 RETURNING ` + endpointColumns

// Delete removes the tenant's endpoint id, its secrets, its deliveries
// (their jobs find nothing to do) and its log; ErrNotFound when there is
// none, so deleting twice is a 404 the second time.
func (s *Service) Delete(ctx context.Context, tenantID, id string) (Endpoint, error) {
	if !payments.ValidID("we_", id) {
		return Endpoint{}, ErrNotFound
	}
	return scanEndpoint(s.DB.QueryRow(ctx, deleteEndpoint, tenantID, id))
}

// DemoID is the id of the demo tenant's endpoint that SeedDemo makes.
const DemoID = "we_demoreceiver000000000000"

const seedEndpoint = `
INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, description, status, created_at, updated_at)
VALUES ($1, $2, $3, '{*}', 'The demo receiver of make run', 'enabled', now(), now())
ON CONFLICT (id) DO UPDATE SET url = excluded.url, status = 'enabled', disabled_reason = NULL, updated_at = now()`

const replaceSecrets = `
WITH gone AS (DELETE FROM webhook_endpoint_secrets WHERE endpoint_id = $1)
INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext) VALUES ($1, $2)`

// SeedDemo gives tenantID the demo endpoint at url, every event, signed
// with secret: for make run's demo receiver, which holds the same secret.
// Running it again points the endpoint at url and secret again.
func SeedDemo(ctx context.Context, db *pgxpool.Pool, box webhook.Box, tenantID, url, secret string) error {
	if _, err := webhook.ParseSecrets(secret); err != nil || secret == "" {
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
