// Package tenants authenticates API keys. A key is stored only as its SHA-256
// hash and belongs to exactly one tenant.
package tenants

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// ErrUnauthorized reports a missing or unknown API key.
var ErrUnauthorized = errors.New("unauthorized")

// Store looks tenants up by API key.
type Store struct {
	DB database.DBTX
	// CacheTTL, when positive, is how long a key that authenticated is
	// trusted without reading it again, so that a busy client's requests do
	// not each cost a query. A key deleted from api_keys keeps working for
	// up to CacheTTL. Unknown keys are never cached.
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached
}

// cached is a key that authenticated, until expires.
type cached struct {
	tenantID string
	expires  time.Time
}

// maxCached bounds the cache: when full, it starts again empty.
const maxCached = 10_000

const tenantByKeyHash = `SELECT tenant_id FROM api_keys WHERE key_hash = $1`

// Authenticate returns the id of the tenant that owns apiKey.
func (s *Store) Authenticate(ctx context.Context, apiKey string) (string, error) {
	if apiKey == "" {
		return "", ErrUnauthorized
	}
	h := sha256.Sum256([]byte(apiKey))
	if id, ok := s.cached(h); ok {
		return id, nil
	}
	var tenantID string
	err := s.DB.QueryRow(ctx, tenantByKeyHash, h[:]).Scan(&tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", err)
	}
	s.remember(h, tenantID)
	return tenantID, nil
}

func (s *Store) cached(h [sha256.Size]byte) (string, bool) {
	if s.CacheTTL <= 0 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cache[h]
	if !ok || time.Now().After(c.expires) {
		return "", false
	}
	return c.tenantID, true
}

func (s *Store) remember(h [sha256.Size]byte, tenantID string) {
	if s.CacheTTL <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil || len(s.cache) >= maxCached {
		s.cache = map[[sha256.Size]byte]cached{}
	}
	s.cache[h] = cached{tenantID: tenantID, expires: time.Now().Add(s.CacheTTL)}
}

const insertTenant = `INSERT INTO tenants (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`

const insertAPIKey = `INSERT INTO api_keys (key_hash, tenant_id) VALUES ($1, $2) ON CONFLICT (key_hash) DO NOTHING`

// Create adds a tenant with one API key; creating it again changes nothing.
func (s *Store) Create(ctx context.Context, id, name, apiKey string) error {
	if _, err := s.DB.Exec(ctx, insertTenant, id, name); err != nil {
		return fmt.Errorf("create tenant %s: %w", id, err)
	}
	if _, err := s.DB.Exec(ctx, insertAPIKey, hash(apiKey), id); err != nil {
		return fmt.Errorf("create api key for %s: %w", id, err)
	}
	return nil
}

// Demo is a development tenant that the seed creates, with its API key.
type Demo struct{ ID, Name, APIKey string }

// Demos are the two tenants of the curl walkthrough. They exist only where the
// seed was run, which is refused outside development.
var Demos = []Demo{
	{ID: "ten_acme", Name: "Acme", APIKey: "sk_test_acme"},
	{ID: "ten_globex", Name: "Globex", APIKey: "sk_test_globex"},
}

// SeedDemos creates the demo tenants.
func (s *Store) SeedDemos(ctx context.Context) error {
	for _, d := range Demos {
		if err := s.Create(ctx, d.ID, d.Name, d.APIKey); err != nil {
			return err
		}
	}
	return nil
}

func hash(apiKey string) []byte {
	sum := sha256.Sum256([]byte(apiKey))
	return sum[:]
}
