package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/signing"
)

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

// Create registers an endpoint under req's key, with a fresh secret, and
// returns it with the secret: the only time it is shown. Its stored
// response, which replays answer, has no secret.
func (s *Service) Create(ctx context.Context, req idempotency.Request, ne NewEndpoint) (idempotency.Lease, *Endpoint, error) {
	if err := operation.Invalid(s.checkFields(&ne.URL, ne.EnabledEvents, true, ne.Description, nil)); err != nil {
		return idempotency.Lease{}, nil, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := Endpoint{WebhookEndpoint: client.WebhookEndpoint{ID: operation.NewID(Resource.Prefix), Object: Resource.Type,
		EnabledEvents: ne.EnabledEvents, Description: ne.Description, Status: StatusEnabled, CreatedAt: now, UpdatedAt: now},
		TenantID: req.TenantID}
	secret := signing.NewSecret()
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
			return s.changedWithSecret(&e, 201, secret, func(b *pgx.Batch) {
				b.Queue(insertEndpoint, e.ID, e.TenantID, e.URL, e.EnabledEvents, e.Description, now)
			})
		}})
	if err != nil || !lease.Created || lease.Key.Resource.ID != e.ID {
		// Not made here, or refused (the key names no endpoint).
		return lease, nil, err
	}
	e.Secret = secret
	return lease, &e, nil
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
	if err := operation.Invalid(append(u.checkNulls(), s.checkFields(u.URL, u.EnabledEvents, false, u.Description, u.Status)...)); err != nil {
		return idempotency.Lease{}, err
	}
	return s.Ops.Start(ctx, req, operation.Steps{Before: s.checkingURL(u.URL),
		Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
			e, err := lock(ctx, tx, req.TenantID, id)
			if err != nil {
				return operation.Plan{}, err
			}
			e = u.apply(e)
			return changed(&e, 200, func(b *pgx.Batch) {
				b.Queue(updateEndpoint, e.ID, e.URL, e.EnabledEvents, e.Description, e.Status, e.DisabledReason, e.UpdatedAt)
			}), nil
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
	if u.Description != nil || slices.Contains(u.nulls, "description") {
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
