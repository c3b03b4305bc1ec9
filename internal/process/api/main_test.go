package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestAPIConfigValidate(t *testing.T) {
	t.Parallel()
	var cfg Config
	if err := process.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRETS_KEY") {
		t.Fatalf("no key for the endpoints' secrets: %v", err)
	}
	if err := cfg.SecretsKey.Decode("dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI="); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults and a key are refused: %v", err)
	}
	short := cfg
	short.LockTimeout = cfg.MaxWait - time.Second
	if err := short.Validate(); err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_LOCK_TIMEOUT") {
		t.Fatalf("a lock timeout under the longest wait: %v", err)
	}
	long := cfg
	long.DefaultWait = cfg.MaxWait + time.Second
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_DEFAULT_WAIT") {
		t.Fatalf("a default wait over the maximum: %v", err)
	}
	reads := cfg
	reads.DBReadConns = 0
	if err := reads.Validate(); err == nil || !strings.Contains(err.Error(), "DB_READ_CONNS") {
		t.Fatalf("no connection for the key's reads: %v", err)
	}
	window := cfg
	window.RateWindow = 100 * time.Millisecond
	if err := window.Validate(); err == nil || !strings.Contains(err.Error(), "TENANT_RATE_WINDOW") {
		t.Fatalf("a rate window under a second: %v", err)
	}
}

// TestKeyReadsHaveTheirOwnPool: the key's reads outside a transaction (a
// request's lookup, a waiter's, the key's endpoint) go through the pool of
// DB_READ_CONNS, and take nothing from the transactions' pool.
func TestKeyReadsHaveTheirOwnPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cfg Config
	if err := process.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.SecretsKey.Decode("dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI="); err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.Addr, cfg.InternalAddr, cfg.DBReadConns = testdb.New(t).URL, "127.0.0.1:0", "127.0.0.1:0", 2
	a, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := a.Keys.Reads.Config().MaxConns; got != 2 {
		t.Fatalf("the reads' pool holds %d connections, want DB_READ_CONNS, 2", got)
	}
	tx := a.Keys.DB.Stat().AcquireCount()
	req := idempotency.Request{TenantID: "ten_acme", Key: "k-1", Method: "POST", Path: "/v1/payments"}
	if _, err := a.Keys.Lookup(ctx, req); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("lookup of a new key: %v", err)
	}
	if _, err := a.Keys.Get(ctx, req.TenantID, req.Key); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("get of a new key: %v", err)
	}
	if _, _, err := a.Keys.Inspect(ctx, req.TenantID, req.Key); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("inspect of a new key: %v", err)
	}
	if n := a.Keys.Reads.Stat().AcquireCount(); n != 3 {
		t.Errorf("the reads' pool lent %d connections for three reads, want 3", n)
	}
	if n := a.Keys.DB.Stat().AcquireCount() - tx; n != 0 {
		t.Errorf("the transactions' pool lent %d connections for three reads, want none", n)
	}
}

// TestAPIConfigMasksTheWebhookSecret: the configuration line the API logs
// at start shows how many processor webhook secrets it holds, never them.
func TestAPIConfigMasksTheWebhookSecret(t *testing.T) {
	t.Setenv("PROCESSOR_WEBHOOK_SECRET", "whsec_ZGVtby1vbmx5LXByb2Nlc3Nvci13ZWJob29rLXNlY3JldA==,whsec_b3RoZXItZGVtby1zZWNyZXQtZm9yLXJvdGF0aW9uLXh4")
	var cfg Config
	if err := process.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	process.LogConfig(process.NewLogger(&buf, "json", slog.LevelInfo), cfg)
	if got := buf.String(); strings.Contains(got, "ZGVtby") || strings.Contains(got, "whsec_") || !strings.Contains(got, `"WebhookSecret":"(2 secrets)"`) {
		t.Fatalf("configuration line: %s", got)
	}
}
