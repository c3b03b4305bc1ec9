package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
)

// The recovery points every operation shares; an operation names its own
// points in between (a payment's charge_created).
// Expired is the state after finished: the stored response was reaped and a
// tombstone remains.
const (
	RecoveryStarted  = "started"
	RecoveryFinished = "finished"
	RecoveryExpired  = "expired"
)

var (
	// ErrKeyInUse reports that another request holds the key's lock now.
	ErrKeyInUse = errors.New("idempotency key in use")
	// ErrKeyMismatch reports a key reused with another method, path or body.
	ErrKeyMismatch = errors.New("idempotency key reused with a different request")
	// ErrNotFound reports that no such key exists for the tenant.
	ErrNotFound = errors.New("idempotency key not found")
	// ErrKeyExpired reports a retry under a key whose response was reaped:
	// the request it stands for was executed, and is not executed again.
	ErrKeyExpired = errors.New("idempotency key expired")
)

// ExpiredError is ErrKeyExpired with what the key created, so that the
// client can be pointed to it.
type ExpiredError struct {
	Resource Resource
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("%v: it created %s %s", ErrKeyExpired, e.Resource.Type, e.Resource.ID)
}

// Unwrap makes errors.Is(err, ErrKeyExpired) true.
func (e *ExpiredError) Unwrap() error { return ErrKeyExpired }

// Request is one attempt at an operation under a key.
type Request struct {
	TenantID    string
	Key         string
	Method      string
	Path        string
	Fingerprint []byte
	// Body is the request's body exactly as received, and Digest is
	// Digest(Method, Path, Body) (nil: the request has none). The digest is
	// stored with a new key and compared first, so that a retry of the same
	// bytes is matched without its body being canonicalized: Fingerprint may
	// be left nil, to be computed from Body only when the digests do not
	// decide (fingerprint).
	Body   []byte
	Digest []byte
	// RequestID is the server's id of the request (req_…), kept with a new
	// key so that the events its operation causes can name it.
	RequestID string
	// Wait is whether the request will wait for the operation to finish. Only
	// a request that waits takes the key's lock: one that answers at once has
	// nothing to hold while it is not running.
	Wait bool
	// Unseen is whether the caller has just looked the key up and found
	// none: the operation goes straight to its first phase, whose insert
	// still fails if the key has been reserved since.
	Unseen bool
}

// Response is a final response, stored once and replayed byte for byte.
type Response struct {
	Status int
	// Header holds the headers that are replayed, such as Content-Type and Location.
	Header map[string]string
	Body   []byte
}

// Resource names what an operation created, such as a payment.
type Resource struct {
	Type string
	ID   string
}

// Key is a stored idempotency key and the state of its operation.
type Key struct {
	ID            int64
	TenantID      string
	Key           string
	Method        string
	Path          string
	Fingerprint   []byte
	Digest        []byte // nil for a key stored without one
	RecoveryPoint string
	LockedAt      *time.Time
	Resource      Resource
	// Response is set once the key is finished.
	Response   *Response
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
	ExpiresAt  *time.Time
}

// Finished reports whether the key's operation has its final response.
func (k Key) Finished() bool { return k.RecoveryPoint == RecoveryFinished }

// Expired reports whether the key is a tombstone: finished long ago, its
// response reaped.
func (k Key) Expired() bool { return k.RecoveryPoint == RecoveryExpired }

// Lease is the outcome of Lookup or Reserve. When held, the caller holds the
// key's lock and must Release it unless the key finishes (which clears it).
type Lease struct {
	Key Key
	// Created is true when this request created the key and ran its first phase.
	Created bool
	// held is true when this request took the key's lock.
	held bool
}

// Store keeps idempotency keys in Postgres. Every time it stamps or compares
// (locks, updates, expiry) is the database's clock, so that processes on
// hosts whose clocks differ still agree on when a lock is stale.
type Store struct {
	DB *pgxpool.Pool
	// Reads, when set, runs the key's reads outside a transaction (Lookup,
	// Get, Inspect, a waiter's): a small pool on the same database, about
	// as many connections as it has cores. These statements only use its
	// CPU; the transactions on DB spend theirs waiting for a commit's flush,
	// and want many connections. Nil means DB (docs/SCALING.md).
	Reads *pgxpool.Pool
	// LockTimeout is the age past which a held lock is stale and may be taken over.
	LockTimeout time.Duration
	// Retention is how long a finished key is kept before it may be reaped.
	Retention time.Duration
	// TombstoneRetention is how long a reaped key's tombstone answers 410
	// before it is deleted and the key may be used again.
	TombstoneRetention time.Duration
	// Notifications, when set, wakes Wait as soon as a key finishes.
	Notifications *Listener
	// Announcer, when set, tells the Listeners of every API which keys the
	// phases run here finished; without it their waiters poll.
	Announcer *Announcer
	// PollInterval is how often Wait looks at the key without a notification.
	PollInterval time.Duration
}

const keyColumns = `id, tenant_id, key, request_method, request_path, request_fingerprint, request_digest, recovery_point,
	locked_at, resource_type, resource_id, response_status, response_headers, response_body,
	created_at, updated_at, finished_at, expires_at`

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

// reads is the pool of the key's reads outside a transaction: Reads, or DB.
func (s *Store) reads() *pgxpool.Pool {
	if s.Reads != nil {
		return s.Reads
	}
	return s.DB
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
// the job that drives it later (operation.Relay). The key is at
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
func (s *Store) Reserve(batch *pgx.Batch, req Request, res Resource, final *Response) (*Reservation, error) {
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
	case err != nil:
		return Lease{}, err
	}
	return Lease{Key: r.key, Created: true, held: r.key.LockedAt != nil}, nil
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

// fingerprint returns req's Fingerprint, computed from its Body if the
// caller has not.
func (req Request) fingerprint() ([]byte, error) {
	if req.Fingerprint != nil {
		return req.Fingerprint, nil
	}
	return Fingerprint(req.Method, req.Path, req.Body)
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

const getKey = `SELECT ` + keyColumns + ` FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`

// Get returns the tenant's key, or ErrNotFound.
func (s *Store) Get(ctx context.Context, tenantID, key string) (Key, error) {
	k, err := scanKey(s.reads().QueryRow(ctx, getKey, tenantID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("get key: %w", err)
	}
	return k, nil
}

// inspectKey reads a key whole, and whether a live request holds its lock.
const inspectKey = `SELECT ` + keyColumns + `, locked_at >= now() - $3::interval
FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`

// Inspect returns the tenant's key, or ErrNotFound, and whether a request
// holds its lock now (a stale lock is not held), by the database's clock.
func (s *Store) Inspect(ctx context.Context, tenantID, key string) (Key, bool, error) {
	var locked *bool
	k, err := scanKey(s.reads().QueryRow(ctx, inspectKey, tenantID, key, s.LockTimeout), &locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, false, ErrNotFound
	}
	if err != nil {
		return Key{}, false, fmt.Errorf("inspect key: %w", err)
	}
	return k, locked != nil && *locked, nil
}

const getKeyByID = `SELECT ` + keyColumns + ` FROM idempotency_keys WHERE id = $1`

// GetByID returns the key with the given id, or ErrNotFound.
func (s *Store) GetByID(ctx context.Context, db database.DBTX, id int64) (Key, error) {
	k, err := scanKey(db.QueryRow(ctx, getKeyByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("get key %d: %w", id, err)
	}
	return k, nil
}

// scanKey reads the key columns, then any extra columns into extra.
func scanKey(row pgx.Row, extra ...any) (Key, error) {
	var (
		k              Key
		c              storedColumns
		finished, exps pgtype.Timestamptz
	)
	err := row.Scan(append([]any{&k.ID, &k.TenantID, &k.Key, &k.Method, &k.Path, &k.Fingerprint, &k.Digest, &k.RecoveryPoint,
		&c.lockedAt, &c.resType, &c.resID, &c.status, &c.header, &c.body, &k.CreatedAt, &k.UpdatedAt, &finished, &exps},
		extra...)...)
	if err != nil {
		return Key{}, err
	}
	k.FinishedAt, k.ExpiresAt = utcOf(finished), utcOf(exps)
	k.CreatedAt, k.UpdatedAt = k.CreatedAt.UTC(), k.UpdatedAt.UTC()
	return k, c.set(&k)
}

// storedColumns are a key's nullable columns as read: its lock, what it
// created and its stored response, null until set. They are read into
// pgtype's values, not pointers to pointers, which pgx plans and allocates
// by reflection on every read.
type storedColumns struct {
	lockedAt       pgtype.Timestamptz
	resType, resID pgtype.Text
	status         pgtype.Int4
	header, body   []byte
}

// set sets the columns on k.
func (c *storedColumns) set(k *Key) error {
	k.LockedAt = utcOf(c.lockedAt)
	if c.resType.Valid && c.resID.Valid {
		k.Resource = Resource{Type: c.resType.String, ID: c.resID.String}
	}
	if c.status.Valid {
		header, err := decodeHeaders(c.header)
		if err != nil {
			return err
		}
		k.Response = &Response{Status: int(c.status.Int32), Header: header, Body: c.body}
	}
	return nil
}

// utcOf is a nullable timestamp read from the database, in UTC; nil when
// null.
func utcOf(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

const countUnfinished = `
SELECT count(*), count(*) FILTER (WHERE updated_at < now() - $1::interval)
FROM idempotency_keys WHERE recovery_point NOT IN ('finished', 'expired')`

// CountUnfinished counts the keys in progress, and those of them quiet for
// longer than quiet (database clock): zombies, unless the sweep and the
// reconciler are doing their work.
func (s *Store) CountUnfinished(ctx context.Context, quiet time.Duration) (inProgress, stale int, err error) {
	if err := s.DB.QueryRow(ctx, countUnfinished, quiet).Scan(&inProgress, &stale); err != nil {
		return 0, 0, fmt.Errorf("count unfinished keys: %w", err)
	}
	return inProgress, stale, nil
}
