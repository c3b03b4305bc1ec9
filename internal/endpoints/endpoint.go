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

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/webhook"
)

// Resource declares endpoints as what an idempotency key creates, and where
// the API serves them.
var Resource = operation.Resource{Type: "webhook_endpoint", Prefix: "we_", Path: "/v1/webhook_endpoints"}

// ResourceType names endpoints as the resource of an idempotency key.
var ResourceType = Resource.Type

// Endpoint statuses.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
)

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
	ErrNotFound = operation.NotFound("webhook endpoint")
	// ErrDisabled reports a resend or a recovery to a disabled endpoint.
	ErrDisabled = errors.New("the webhook endpoint is disabled")
	// ErrDeliveryInFlight reports a resend of a delivery whose attempts go
	// on: one chain of attempts per delivery.
	ErrDeliveryInFlight = errors.New("the delivery is still being attempted")
	// ErrRotating reports a rotation while the endpoint has as many secrets
	// signing as it may.
	ErrRotating = errors.New("the endpoint has as many signing secrets as it may")
	// ErrTooManyEndpoints reports a tenant at its limit of endpoints.
	ErrTooManyEndpoints = errors.New("the tenant has as many webhook endpoints as it may")
)

// Rules are how the API answers the endpoints' own refusals.
var Rules = []operation.ErrorRule{
	{Err: ErrDisabled, Status: 409, Code: "endpoint_disabled", Title: "Endpoint disabled",
		Detail: "The webhook endpoint is disabled: enable it first."},
	{Err: ErrDeliveryInFlight, Status: 409, Code: "delivery_in_flight", Title: "Delivery in flight",
		Detail: "This event's delivery to this endpoint is still being attempted, on its retry schedule; resend it once it has failed."},
	{Err: ErrRotating, Status: 409, Code: "rotation_in_progress", Title: "Rotation in progress",
		Detail: "A secret rotated out earlier still signs: wait until it expires, or rotate with expire_current_secret_in 0 to end every older secret at once."},
	{Err: ErrTooManyEndpoints, Status: 400, Code: "endpoint_limit_reached", Title: "Too many webhook endpoints",
		Detail: "The account has as many webhook endpoints as it may (WEBHOOK_MAX_ENDPOINTS): delete one first."},
}

// Endpoint is a tenant's webhook endpoint.
type Endpoint struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
	Status        string   `json:"status"`
	// DisabledReason is by_tenant; gone when the receiver answered 410;
	// failing when every attempt failed for WEBHOOK_DISABLE_AFTER.
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

// stored is the endpoint with status, without its secret: a stored
// response never holds one.
func (e Endpoint) stored(status int) idempotency.Response {
	e.Secret = ""
	return render.Stored(status, "application/json", Resource.Path+"/"+e.ID, render.Encode(e))
}

// stored is the delivery with status.
func (d Delivery) stored(status int) idempotency.Response {
	return render.Stored(status, "application/json", Resource.Path+"/"+d.Endpoint+"/deliveries", render.Encode(d))
}

// Jobs stages the jobs of deliveries in the transaction that writes them,
// and returns their IDs, in the order of deliveryIDs.
type Jobs interface {
	EnqueueDeliveries(ctx context.Context, tx pgx.Tx, deliveryIDs ...int64) ([]int64, error)
}

// ownJobs makes each job ($2) the one job of its delivery ($1): the only one
// that may make its attempts from now on (claimAttempt).
const ownJobs = `
UPDATE webhook_deliveries d SET job = j.job
FROM unnest($1::bigint[], $2::bigint[]) AS j (id, job) WHERE d.id = j.id`

// enqueue inserts the jobs of deliveries ids in tx, each its delivery's one
// job from now on. A job inserted for a delivery before, whose worker died
// as it ended (in line, or its delivery over) or while it ran, stays running
// until River rescues it: it then finds it is not its delivery's job any
// more and ends, so that no delivery is ever attempted by two jobs at once.
func enqueue(ctx context.Context, jobs Jobs, tx pgx.Tx, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	jobIDs, err := jobs.EnqueueDeliveries(ctx, tx, ids...)
	if err != nil {
		return err
	}
	if err := database.Later(ctx, tx, ownJobs, ids, jobIDs); err != nil {
		return fmt.Errorf("own delivery jobs: %w", err)
	}
	return nil
}

// Service manages the tenants' endpoints.
type Service struct {
	// Ops runs the first phase of every change, in the shape of every
	// idempotent POST (operation.Service.Start).
	Ops  *operation.Service
	Jobs Jobs
	// Policy decides which URLs may be registered.
	Policy safehttp.Policy
	Cipher webhook.Box
	// EventTypes are the event types an endpoint may ask for (those the
	// kinds stage); "*" asks for all.
	EventTypes []string
	// MaxEndpoints is how many endpoints a tenant may have.
	MaxEndpoints int
	// MaxSecrets is how many secrets of an endpoint may sign at once: the
	// current one and those being rotated out.
	MaxSecrets int
}

// checkFields validates what can be checked without the network.
func (s *Service) checkFields(url *string, events []string, eventsRequired bool, description *string, status *string) []operation.FieldError {
	var errs []operation.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, operation.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if url != nil && (*url == "" || !operation.Storable(*url)) {
		add("url", "is required, an https URL")
	}
	switch {
	case events == nil && eventsRequired:
		add("enabled_events", `is required: event types, or ["*"] for all`)
	case events != nil && (len(events) == 0 || len(events) > MaxEnabledEvents):
		add("enabled_events", "must list 1 to %d event types", MaxEnabledEvents)
	}
	for _, t := range events {
		if t != "*" && !slices.Contains(s.EventTypes, t) {
			add("enabled_events", "%q is not an event type: use %v or \"*\"", t, s.EventTypes)
			break
		}
	}
	if description != nil && (utf8.RuneCountInString(*description) > MaxDescription || !operation.Storable(*description)) {
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
		return "", operation.Invalid([]operation.FieldError{{Field: "url", Message: err.Error()}})
	}
	return normal, nil
}

// checkingURL is the step of a first phase that checks a URL, when there is
// one, and puts its normal form in its place.
func (s *Service) checkingURL(rawURL *string) func(ctx context.Context) error {
	if rawURL == nil {
		return nil
	}
	return func(ctx context.Context) error {
		normal, err := s.checkURL(ctx, *rawURL)
		*rawURL = normal
		return err
	}
}

const insertEndpoint = `
INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, description, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'enabled', $6, $6)`

// countEndpoints counts the tenant's endpoints under a lock of its own
// (until the transaction ends), so that two registrations cannot both take
// the last place.
const (
	lockEndpoints  = `SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))`
	countEndpoints = `SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1`
)

const insertSecret = `
INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext) VALUES ($1, $2)`

// Create registers an endpoint under req's key, with a fresh secret, and
// returns it with the secret: the only time it is shown. Its stored
// response, which replays answer, has no secret.
func (s *Service) Create(ctx context.Context, req idempotency.Request, ne NewEndpoint) (idempotency.Lease, *Endpoint, error) {
	if err := operation.Invalid(s.checkFields(&ne.URL, ne.EnabledEvents, true, ne.Description, nil)); err != nil {
		return idempotency.Lease{}, nil, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := Endpoint{ID: operation.NewID(Resource.Prefix), Object: Resource.Type, EnabledEvents: ne.EnabledEvents,
		Description: ne.Description, Status: StatusEnabled, CreatedAt: now, UpdatedAt: now, TenantID: req.TenantID}
	secret := webhook.NewSecret()
	lease, err := s.Ops.Start(ctx, req, operation.Steps{Before: s.checkingURL(&ne.URL),
		Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
			var n int
			if _, err := tx.Exec(ctx, lockEndpoints, req.TenantID); err != nil {
				return operation.Plan{}, fmt.Errorf("lock endpoints: %w", err)
			}
			if err := tx.QueryRow(ctx, countEndpoints, req.TenantID).Scan(&n); err != nil {
				return operation.Plan{}, fmt.Errorf("count endpoints: %w", err)
			}
			if n >= s.MaxEndpoints {
				return operation.Plan{Refusal: ErrTooManyEndpoints}, nil
			}
			e.URL = ne.URL
			sealed, err := s.Cipher.Seal(e.ID, []byte(secret))
			if err != nil {
				return operation.Plan{}, err
			}
			return operation.Plan{
				Resource: idempotency.Resource{Type: Resource.Type, ID: e.ID},
				Rows: func(b *pgx.Batch) {
					b.Queue(insertEndpoint, e.ID, e.TenantID, e.URL, e.EnabledEvents, e.Description, now)
					b.Queue(insertSecret, e.ID, sealed)
				},
				Response: func() idempotency.Response { return e.stored(201) },
			}, nil
		}})
	if err != nil || !lease.Created || lease.Key.Resource.ID != e.ID {
		// Not made here, or refused (the key names no endpoint).
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
	e := Endpoint{Object: Resource.Type}
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

const updateEndpoint = `
UPDATE webhook_endpoints
SET url = $2, enabled_events = $3, description = $4, status = $5, disabled_reason = $6, updated_at = $7,
	version = version + 1, failing_since = CASE WHEN status = $5 THEN failing_since END
WHERE id = $1`

// Update changes the tenant's endpoint id under req's key. A disabled
// endpoint gets no new deliveries; enabling it again gets it the events
// staged from then on.
func (s *Service) Update(ctx context.Context, req idempotency.Request, id string, u Update) (idempotency.Lease, error) {
	if err := operation.Invalid(s.checkFields(u.URL, u.EnabledEvents, false, u.Description, u.Status)); err != nil {
		return idempotency.Lease{}, err
	}
	return s.Ops.Start(ctx, req, operation.Steps{Before: s.checkingURL(u.URL),
		Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
			e, err := lock(ctx, tx, req.TenantID, id)
			if err != nil {
				return operation.Plan{}, err
			}
			e = u.apply(e)
			return operation.Plan{
				Resource: idempotency.Resource{Type: Resource.Type, ID: e.ID},
				Rows: func(b *pgx.Batch) {
					b.Queue(updateEndpoint, e.ID, e.URL, e.EnabledEvents, e.Description, e.Status, e.DisabledReason, e.UpdatedAt)
				},
				Response: func() idempotency.Response { return e.stored(200) },
			}, nil
		}})
}

// apply is e changed as u asks.
func (u Update) apply(e Endpoint) Endpoint {
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
	return e
}

// retireSecrets makes the endpoint's current secrets expire after the grace
// period $2 at the latest (database clock): they sign, with the new one,
// until then.
const retireSecrets = `
UPDATE webhook_endpoint_secrets SET expires_at = now() + $2::interval
WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now() + $2::interval)`

// countLiveSecrets counts the endpoint's secrets that sign now.
const countLiveSecrets = `
SELECT count(*) FROM webhook_endpoint_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())`

// RotateSecret gives the tenant's endpoint id a new secret under req's key
// and returns the endpoint with it, the only time it is shown. The current
// secret still signs, alongside the new one, for the grace period the
// rotation asks (a day by default), so that the receiver can switch without
// refusing a delivery. While MaxSecrets sign already, only a rotation that
// ends the older ones at once (a grace of 0) is taken: ErrRotating.
func (s *Service) RotateSecret(ctx context.Context, req idempotency.Request, id string, r Rotation) (idempotency.Lease, *Endpoint, error) {
	grace := DefaultGrace
	if r.ExpireCurrentSecretIn != nil {
		if *r.ExpireCurrentSecretIn < 0 || *r.ExpireCurrentSecretIn > int64(MaxGrace/time.Second) {
			return idempotency.Lease{}, nil, operation.Invalid([]operation.FieldError{{Field: "expire_current_secret_in",
				Message: fmt.Sprintf("must be 0 to %d seconds", int64(MaxGrace/time.Second))}})
		}
		grace = time.Duration(*r.ExpireCurrentSecretIn) * time.Second
	}
	secret := webhook.NewSecret()
	var e Endpoint
	lease, err := s.Ops.Start(ctx, req, operation.Steps{Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
		var err error
		if e, err = lock(ctx, tx, req.TenantID, id); err != nil {
			return operation.Plan{}, err
		}
		var live int
		if err := tx.QueryRow(ctx, countLiveSecrets, e.ID).Scan(&live); err != nil {
			return operation.Plan{}, fmt.Errorf("count secrets: %w", err)
		}
		if grace > 0 && live >= s.MaxSecrets {
			return operation.Plan{}, ErrRotating
		}
		sealed, err := s.Cipher.Seal(e.ID, []byte(secret))
		if err != nil {
			return operation.Plan{}, err
		}
		return operation.Plan{
			Resource: idempotency.Resource{Type: Resource.Type, ID: e.ID},
			Rows: func(b *pgx.Batch) {
				b.Queue(retireSecrets, e.ID, grace)
				b.Queue(insertSecret, e.ID, sealed)
			},
			Response: func() idempotency.Response { return e.stored(200) },
		}, nil
	}})
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
	if !operation.ValidID(Resource.Prefix, id) {
		return Endpoint{}, ErrNotFound
	}
	return scanEndpoint(s.Ops.DB.QueryRow(ctx, deleteEndpoint, tenantID, id))
}

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
