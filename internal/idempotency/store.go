package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	// ErrTenantGone reports a request of a tenant deleted since it was
	// authenticated: nothing of it was written.
	ErrTenantGone = errors.New("the API key's tenant does not exist")
	// ErrKeyExpired reports a retry under a key whose response was reaped:
	// the request it stands for was executed, and is not executed again.
	ErrKeyExpired = errors.New("idempotency key expired")
)

// ExpiredError is ErrKeyExpired with what the key created, so that the
// client can be pointed to it.
type ExpiredError struct {
	Resource ResourceRef
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

// fingerprint returns req's Fingerprint, computed from its Body if the
// caller has not.
func (req Request) fingerprint() ([]byte, error) {
	if req.Fingerprint != nil {
		return req.Fingerprint, nil
	}
	return Fingerprint(req.Method, req.Path, req.Body)
}

// Response is a final response, stored once and replayed byte for byte.
type Response struct {
	Status int
	// Header holds the headers that are replayed, such as Content-Type and Location.
	Header map[string]string
	Body   []byte
}

// ResourceRef names what an operation created, such as a payment.
type ResourceRef struct {
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
	Resource      ResourceRef
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

// reads is the pool of the key's reads outside a transaction: Reads, or DB.
func (s *Store) reads() *pgxpool.Pool {
	if s.Reads != nil {
		return s.Reads
	}
	return s.DB
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
