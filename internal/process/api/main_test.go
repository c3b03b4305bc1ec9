package api

import (
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"
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
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
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
