package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/signing"
)

const insertSecret = `
INSERT INTO webhook_endpoint_secrets (endpoint_id, ciphertext) VALUES ($1, $2)`

// changedWithSecret is changed with the row of a new secret after rows:
// secret, sealed for e.
func (s *Service) changedWithSecret(e *Endpoint, status int, secret string, rows func(b *pgx.Batch)) (operation.Plan, error) {
	sealed, err := s.Cipher.Seal(e.ID, []byte(secret))
	if err != nil {
		return operation.Plan{}, err
	}
	return changed(e, status, func(b *pgx.Batch) {
		rows(b)
		b.Queue(insertSecret, e.ID, sealed)
	}), nil
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
	grace, err := r.grace()
	if err != nil {
		return idempotency.Lease{}, nil, err
	}
	secret := signing.NewSecret()
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
		return s.changedWithSecret(&e, 200, secret, func(b *pgx.Batch) {
			b.Queue(retireSecrets, e.ID, grace)
		})
	}})
	if err != nil || !lease.Created {
		return lease, nil, err
	}
	e.Secret = secret
	return lease, &e, nil
}

// grace is how long the secrets r rotates out still sign: DefaultGrace,
// unless r says otherwise, from 0 to MaxGrace.
func (r Rotation) grace() (time.Duration, error) {
	if r.ExpireCurrentSecretIn == nil {
		return DefaultGrace, nil
	}
	if *r.ExpireCurrentSecretIn < 0 || *r.ExpireCurrentSecretIn > int64(MaxGrace/time.Second) {
		return 0, operation.Invalid([]operation.FieldError{{Field: "expire_current_secret_in",
			Message: fmt.Sprintf("must be 0 to %d seconds", int64(MaxGrace/time.Second))}})
	}
	return time.Duration(*r.ExpireCurrentSecretIn) * time.Second, nil
}
