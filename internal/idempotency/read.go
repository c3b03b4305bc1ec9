package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/payments/internal/database"
)

// keyColumns are a key's columns, in the order scanKey reads them.
const keyColumns = `id, tenant_id, key, request_method, request_path, request_fingerprint, request_digest, recovery_point,
	locked_at, resource_type, resource_id, response_status, response_headers, response_body,
	created_at, updated_at, finished_at, expires_at`

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
		k.Resource = ResourceRef{Type: c.resType.String, ID: c.resID.String}
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
