package main

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

// defaults is the configuration with every default applied.
func defaults(t *testing.T) config {
	t.Helper()
	var cfg config
	if err := envconfig.Process("payments_worker_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := defaults(t).validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*config)
		setting string // the setting the message must name
	}{
		{"ErrProcessorForgetsKeys", func(c *config) { c.ProcessorKeyRetention = 24 * time.Hour }, "PROCESSOR_KEY_RETENTION"},
		{"ErrRetentionEatsMargin", func(c *config) { c.KeyRetention = 200 * time.Hour }, "PROCESSOR_KEY_RETENTION"},
		{"ErrDeadlineBeforeRetries", func(c *config) { c.ChargeDeadline = time.Minute }, "CHARGE_DEADLINE"},
		{"ErrJobTimeout", func(c *config) { c.JobTimeout = c.ProcessorTimeout }, "JOB_TIMEOUT"},
		{"ErrStuckAfter", func(c *config) { c.StuckAfter = c.JobTimeout }, "RECONCILE_STUCK_AFTER"},
		{"ErrBackoff", func(c *config) { c.RetryMaxDelay = c.RetryBaseDelay / 2 }, "RETRY_BASE_DELAY"},
		{"ErrAttempts", func(c *config) { c.MaxAttempts = 0 }, "CHARGE_MAX_ATTEMPTS"},
		{"ErrTombstones", func(c *config) { c.TombstoneRetention = 0 }, "IDEMPOTENCY_TOMBSTONE_RETENTION"},
		{"ErrLedgerPage", func(c *config) { c.LedgerPageSize = 5000 }, "RECONCILE_LEDGER_PAGE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaults(t)
			tc.change(&cfg)
			err := cfg.validate()
			if err == nil || !strings.Contains(err.Error(), tc.setting) {
				t.Fatalf("err = %v, want one naming %s", err, tc.setting)
			}
		})
	}
}
