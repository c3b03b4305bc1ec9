package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/payments/internal/database"
)

// reserveKey inserts a new key, with its request's fingerprint and digest
// ($14, null when the request has none), naming what its operation creates:
// at started, with the lock taken when the request waits, or, given a
// response ($9), finished with it at once. A key that exists fails it on the
// unique index of (tenant, key).
const reserveKey = `
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, request_digest,
	request_id, recovery_point, locked_at, resource_type, resource_id,
	response_status, response_headers, response_body, created_at, updated_at, finished_at, expires_at)
SELECT $1, $2, $3, $4, $5, $14, nullif($13, ''),
	CASE WHEN final THEN 'finished' ELSE 'started' END, CASE WHEN $6::boolean AND NOT final THEN now() END,
	nullif($7, ''), nullif($8, ''), $9, $10, $11, now(), now(),
	CASE WHEN final THEN now() END, CASE WHEN final THEN now() + $12::interval END
FROM (SELECT $9::integer IS NOT NULL AS final) AS k
RETURNING id, locked_at, created_at, finished_at, expires_at`

// tenantWrites takes tenant $1's write lock, shared, for the transaction,
// and refuses with SQLSTATE 23503 (tenant_gone) when the tenant is gone: a
// delete of the tenant takes the lock alone before it looks for the
// tenant's rows (tenants_in_use), so no first phase writes rows the
// delete does not see, for a tenant re-created under the id to inherit.
const tenantWrites = `SELECT tenant_writes($1)`

// Reservation is a key being reserved in the first phase of its operation
// (Reserve); Lease tells how it went once the phase's batch has run.
type Reservation struct {
	store *Store
	req   Request
	key   Key
	// taken is whether the key existed: another request committed it
	// since Lookup.
	taken bool
}

// Reserve queues in batch the insert of req's key, naming res as what the
// operation creates (none for an operation refused at once); the relay names
// the job that drives it later (outbox.Relay). The key is at
// RecoveryStarted; given final, the operation's answer decided in its first
// phase (a refusal, or an operation with no later phase), it is finished with
// it at once. The key keeps req's fingerprint, computed from its body if the
// caller has not (a body that is not JSON is an error), and its digest.
//
// The batch is the operation's first phase: the caller queues its own rows
// after the key and sends the batch, with the COMMIT, in the phase's
// transaction (database.Tx's CommitWith), so that the key, the rows and the
// commit cost one round trip. A row that refers to the key finds it by
// (tenant, key) and res.ID. When the key exists, its insert fails on the
// unique index and the server skips the rest of the batch, the COMMIT too:
// nothing of the phase is written. Lease tells the outcome.
func (s *Store) Reserve(batch *pgx.Batch, req Request, res ResourceRef, final *Response) (*Reservation, error) {
	fp, err := req.fingerprint()
	if err != nil {
		return nil, fmt.Errorf("reserve key: %w", err)
	}
	req.Fingerprint = fp
	r := &Reservation{store: s, req: req, key: Key{TenantID: req.TenantID, Key: req.Key, Method: req.Method, Path: req.Path,
		Fingerprint: fp, Digest: req.Digest, RecoveryPoint: RecoveryStarted, Resource: res, Response: final}}
	var (
		status *int
		header []byte
		body   []byte
	)
	if final != nil {
		if s.Retention <= 0 {
			// A key finished with no retention could be reaped at once.
			return nil, errors.New("reserve key: the store has no Retention set")
		}
		if header, err = encodeHeaders(final.Header); err != nil {
			return nil, err
		}
		status, body, r.key.RecoveryPoint = &final.Status, final.Body, RecoveryFinished
	}
	// Its first statement: the tenant's write lock, shared with the other
	// first phases, which a delete of the tenant waits for (tenants_in_use).
	batch.Queue(tenantWrites, req.TenantID).Exec(func(pgconn.CommandTag) error { return nil })
	batch.Queue(reserveKey, req.TenantID, req.Key, req.Method, req.Path, req.Fingerprint, req.Wait,
		res.Type, res.ID, status, header, body, s.Retention, req.RequestID, req.Digest).QueryRow(func(row pgx.Row) error {
		k := &r.key
		var lockedAt, finished, exps pgtype.Timestamptz
		err := row.Scan(&k.ID, &lockedAt, &k.CreatedAt, &finished, &exps)
		if database.IsCode(err, uniqueViolation) {
			r.taken = true
		}
		if err != nil {
			return fmt.Errorf("reserve key: %w", err)
		}
		k.UpdatedAt, k.CreatedAt = k.CreatedAt.UTC(), k.CreatedAt.UTC()
		k.LockedAt, k.FinishedAt, k.ExpiresAt = utcOf(lockedAt), utcOf(finished), utcOf(exps)
		return nil
	})
	return r, nil
}

// uniqueViolation is the SQLSTATE of a key that exists: its insert broke
// the unique index of (tenant, key).
const uniqueViolation = "23505"

// tenantGone reports whether err is tenantWrites's refusal.
func tenantGone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "tenant_gone"
}

// Lease is the outcome of the reservation, given err, what running its batch
// returned, once the phase's transaction has ended (committed, or rolled
// back on err): the new key, with its lock held when the request waits. The
// unique index on (tenant, key) decides between concurrent first requests:
// when another committed the key since Lookup, Lease reads it and answers
// for it, with Created false, and takes no lock: the key was made a moment
// ago by a request as good as concurrent, so one that waits is refused with
// ErrKeyInUse. Any other error is returned as it is.
func (r *Reservation) Lease(ctx context.Context, err error) (Lease, error) {
	switch {
	case r.taken:
		key, locked, err := r.store.lookup(ctx, r.store.DB, r.req)
		if errors.Is(err, ErrNotFound) {
			// Reaped since: only possible once it was finished and expired.
			return Lease{}, ErrKeyInUse
		}
		if err != nil {
			return Lease{}, err
		}
		return r.store.decide(ctx, r.req, key, locked || r.req.Wait)
	case tenantGone(err):
		return Lease{}, fmt.Errorf("%w: %w", ErrTenantGone, err)
	case err != nil:
		return Lease{}, err
	}
	return Lease{Key: r.key, Created: true, held: r.key.LockedAt != nil}, nil
}
