package api

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/process"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestAPIConfigValidate(t *testing.T) {
	t.Parallel()
	var cfg Config
	if err := envconfig.Process("payments_api_test_unset", &cfg); err != nil {
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
	window := cfg
	window.RateWindow = 100 * time.Millisecond
	if err := window.Validate(); err == nil || !strings.Contains(err.Error(), "TENANT_RATE_WINDOW") {
		t.Fatalf("a rate window under a second: %v", err)
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
