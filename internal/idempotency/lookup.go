package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/payments/internal/database"
)

// lookupKey reads what answering a request from its key needs (the
// fingerprint and the digest, the recovery point, what it created, the
// stored response) and whether a live request holds its lock (a stale lock
// is not held), by the database's clock: one read of the (tenant, key)
// index, and no more columns than a replay uses.
const lookupKey = `SELECT id, request_fingerprint, request_digest, recovery_point, locked_at, resource_type, resource_id,
	response_status, response_headers, response_body, locked_at >= now() - $3::interval
FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`

// Lookup answers req from its key as it stands, by one read before any
// transaction: a finished key is returned to be replayed, an unfinished one
// to be answered as it stands, with its lock taken when the request waits. A
// key held by another request gives ErrKeyInUse, a different request
// ErrKeyMismatch, a tombstone an ExpiredError. ErrNotFound means the key is
// new: the operation's first phase reserves it (Reserve).
func (s *Store) Lookup(ctx context.Context, req Request) (Lease, error) {
	key, locked, err := s.lookup(ctx, s.reads(), req)
	if err != nil {
		return Lease{}, err
	}
	return s.decide(ctx, req, key, locked)
}

// lookup reads req's key as lookupKey does, on db; ErrNotFound when there is
// none. The key has the fields a request is answered from, and its tenant
// and name; its timestamps are not read.
func (s *Store) lookup(ctx context.Context, db database.DBTX, req Request) (Key, bool, error) {
	// Every target is a field of k or c: two allocations, where a variable
	// each would escape on its own.
	var (
		k = Key{TenantID: req.TenantID, Key: req.Key}
		c struct {
			storedColumns
			locked pgtype.Bool
		}
	)
	err := db.QueryRow(ctx, lookupKey, req.TenantID, req.Key, s.LockTimeout).Scan(&k.ID, &k.Fingerprint,
		&k.Digest, &k.RecoveryPoint, &c.lockedAt, &c.resType, &c.resID, &c.status, &c.header, &c.body, &c.locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, false, ErrNotFound
	}
	if err != nil {
		return Key{}, false, fmt.Errorf("look up key: %w", err)
	}
	if err := c.set(&k); err != nil {
		return Key{}, false, err
	}
	return k, c.locked.Valid && c.locked.Bool, nil
}

// lockKey takes the lock of an unfinished key that no live request holds.
const lockKey = `
UPDATE idempotency_keys SET locked_at = now()
WHERE id = $1 AND recovery_point NOT IN ('finished', 'expired')
	AND (locked_at IS NULL OR locked_at < now() - $2::interval)
RETURNING ` + keyColumns

// decide answers req for key, an existing key that locked says a live
// request holds: it belongs to another request, is finished (replay it),
// expired (a tombstone), or held; otherwise a request that waits takes its
// lock, and one that does not is answered with the key as it stands.
func (s *Store) decide(ctx context.Context, req Request, key Key, locked bool) (Lease, error) {
	same, err := key.sameRequest(req)
	switch {
	case err != nil:
		return Lease{}, err
	case !same:
		return Lease{}, ErrKeyMismatch
	case key.Finished():
		return Lease{Key: key}, nil
	case key.Expired():
		return Lease{}, &ExpiredError{Resource: key.Resource}
	case locked:
		return Lease{}, ErrKeyInUse
	case !req.Wait:
		return Lease{Key: key}, nil
	}
	taken, err := scanKey(s.DB.QueryRow(ctx, lockKey, key.ID, s.LockTimeout))
	if err == nil {
		return Lease{Key: taken, held: true}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, fmt.Errorf("lock key: %w", err)
	}
	// Another request took the lock first, or the key moved on: look again,
	// once, and answer for what is there now.
	key, err = s.GetByID(ctx, s.DB, key.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		// Reaped meanwhile: only possible once it was finished and expired.
		return Lease{}, ErrKeyInUse
	case err != nil:
		return Lease{}, err
	case key.Finished():
		return Lease{Key: key}, nil
	case key.Expired():
		return Lease{}, &ExpiredError{Resource: key.Resource}
	}
	return Lease{}, ErrKeyInUse
}

// sameRequest reports whether req is the request k was stored for: the same
// raw bytes, by digest, or else the same canonical fingerprint. Only when
// the digests do not decide is req's body canonicalized; one that is not
// JSON is an error.
func (k Key) sameRequest(req Request) (bool, error) {
	if k.Digest != nil && bytes.Equal(k.Digest, req.Digest) {
		return true, nil
	}
	fp, err := req.fingerprint()
	if err != nil {
		return false, err
	}
	return bytes.Equal(k.Fingerprint, fp), nil
}

const releaseLock = `UPDATE idempotency_keys SET locked_at = NULL WHERE id = $1 AND locked_at = $2`

// Release gives up the lock that lease holds, unless a later request has
// already taken it over as stale. A key that finished has no lock to give up.
func (s *Store) Release(ctx context.Context, lease Lease) error {
	if !lease.held {
		return nil
	}
	if _, err := s.DB.Exec(ctx, releaseLock, lease.Key.ID, *lease.Key.LockedAt); err != nil {
		return fmt.Errorf("release key lock: %w", err)
	}
	return nil
}
