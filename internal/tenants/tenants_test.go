package tenants_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

func TestAuthenticateCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	seed := &tenants.Store{DB: db.Pool}
	if err := seed.Create(ctx, "ten_1", "One", "sk_one"); err != nil {
		t.Fatal(err)
	}
	cachedLong := &tenants.Store{DB: db.Pool, CacheTTL: time.Hour}
	uncached := &tenants.Store{DB: db.Pool}
	expiring := &tenants.Store{DB: db.Pool, CacheTTL: time.Millisecond}
	for _, s := range []*tenants.Store{cachedLong, uncached, expiring} {
		if id, err := s.Authenticate(ctx, "sk_one"); err != nil || id != "ten_1" {
			t.Fatalf("Authenticate = %q, %v", id, err)
		}
	}
	// An unknown key is refused and not remembered as refused.
	if _, err := cachedLong.Authenticate(ctx, "sk_two"); !errors.Is(err, tenants.ErrUnauthorized) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := seed.Create(ctx, "ten_2", "Two", "sk_two"); err != nil {
		t.Fatal(err)
	}
	if id, err := cachedLong.Authenticate(ctx, "sk_two"); err != nil || id != "ten_2" {
		t.Fatalf("key created after a refusal = %q, %v", id, err)
	}

	db.Exec(t, `DELETE FROM api_keys`) // every key revoked
	// Within its TTL a key that authenticated is trusted without a query...
	if id, err := cachedLong.Authenticate(ctx, "sk_one"); err != nil || id != "ten_1" {
		t.Fatalf("cached key after deletion = %q, %v", id, err)
	}
	// ...without a cache the deletion counts at once, and past the TTL it counts.
	if _, err := uncached.Authenticate(ctx, "sk_one"); !errors.Is(err, tenants.ErrUnauthorized) {
		t.Fatalf("uncached key after deletion: %v", err)
	}
	testwait.Within(t, 5*time.Second, "the cached key to expire", func() bool {
		_, err := expiring.Authenticate(ctx, "sk_one")
		return errors.Is(err, tenants.ErrUnauthorized)
	})
}
