package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/process"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// defaults is the configuration with every default applied, and the key
// of the endpoints' secrets, which has none.
func defaults(t *testing.T) Config {
	t.Helper()
	var cfg Config
	if err := envconfig.Process("payments_worker_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	processor(t, &cfg, fake.Adapter)
	if err := cfg.SecretsKey.Decode("dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI="); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestWorkerConfigValidate(t *testing.T) {
	t.Parallel()
	if err := defaults(t).Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	// With no reconciler, the retries are all the deadline must cover.
	noReconciler := defaults(t)
	noReconciler.ReconcileInterval = 0
	noReconciler.Deadline = noReconciler.backoff().Horizon(noReconciler.MaxAttempts, noReconciler.JobTimeout)
	if err := noReconciler.Validate(); err != nil {
		t.Fatalf("a deadline of the retry horizon, with no reconciler: %v", err)
	}
	// Stripe at the defaults: how long the service keeps its own keys has
	// nothing to do with when calls reach Stripe.
	withStripe := defaults(t)
	stripeConfig(t, &withStripe)
	if err := withStripe.Validate(); err != nil {
		t.Fatalf("Stripe at the defaults: %v", err)
	}
	if withStripe.KeyRetention.KeyRetention = 30 * 24 * time.Hour; withStripe.Validate() != nil {
		t.Fatalf("Stripe with the service's keys kept 30 days: %v", withStripe.Validate())
	}
	if withStripe.Deadline = 21*time.Hour + 40*time.Minute; withStripe.Validate() == nil {
		t.Fatal("Stripe with a deadline past its key window (a tenth short of 24 h): taken")
	}
	noKey := defaults(t)
	noKey.Webhooks = process.Webhooks{}
	if err := noKey.Validate(); err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRETS_KEY") {
		t.Fatalf("no key for the endpoints' secrets: %v", err)
	}
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		setting string // the setting the message must name
	}{
		{"ErrProcessorForgetsKeys", func(c *Config) { c.Processor.Settings.(*fake.Settings).KeyRetention = time.Hour }, "keeps its idempotency keys 1h0m0s"},
		{"ErrDeadlinePastKeys", func(c *Config) { c.Deadline = 160 * time.Hour }, "OPERATION_DEADLINE + JOB_TIMEOUT"},
		{"ErrDeadlineBeforeRetries", func(c *Config) { c.Deadline = time.Minute }, "OPERATION_DEADLINE"},
		// Past the retries, the reconciler needs its interval and a pass.
		{"ErrDeadlineBeforeReconciler", func(c *Config) { c.Deadline = c.backoff().Horizon(c.MaxAttempts, c.JobTimeout) + c.ReconcileTimeout }, "RECONCILE_INTERVAL"},
		{"ErrJobTimeout", func(c *Config) { c.JobTimeout = c.ProcessorTimeout }, "JOB_TIMEOUT"},
		{"ErrStuckAfter", func(c *Config) { c.StuckAfter = c.JobTimeout }, "RECONCILE_STUCK_AFTER"},
		{"ErrBackoff", func(c *Config) { c.RetryMaxDelay = c.RetryBaseDelay / 2 }, "RETRY_BASE_DELAY"},
		{"ErrAttempts", func(c *Config) { c.MaxAttempts = 0 }, "OPERATION_MAX_ATTEMPTS"},
		{"ErrTombstones", func(c *Config) { c.TombstoneRetention = 0 }, "IDEMPOTENCY_TOMBSTONE_RETENTION"},
		{"ErrLedgerPage", func(c *Config) { c.LedgerPageSize = 5000 }, "RECONCILE_LEDGER_PAGE"},
		{"ErrProcessor", func(c *Config) { c.Processor = process.Processor{Name: "paypal"} }, "must be one of fake, stripe"},
		{"ErrProcessorSettings", func(c *Config) { c.Processor.Name = "stripe" }, "its settings declare processor \"fake\""},
		{"ErrProcessorUnread", func(c *Config) { c.Processor.Settings = nil }, "settings of processor fake were not read"},
		// Stripe: its 24 hours of keys, its pages of 100.
		{"ErrStripeForgetsKeys", func(c *Config) { stripeConfig(t, c); c.Deadline = 22 * time.Hour }, "keeps its idempotency keys 24h0m0s"},
		{"ErrStripePage", func(c *Config) { stripeConfig(t, c); c.LedgerPageSize = 1000 }, "RECONCILE_LEDGER_PAGE"},
		// Doubled that often, a base of seconds overflows a time.Duration: the
		// horizon must not wrap around below the default deadline.
		{"ErrDeadlineBeforeManyRetries", func(c *Config) { c.RetryBaseDelay = 10 * time.Second; c.MaxAttempts = 1000 }, "OPERATION_DEADLINE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaults(t)
			tc.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.setting) {
				t.Fatalf("err = %v, want one naming %s", err, tc.setting)
			}
		})
	}
}

// TestCommon: a log format nobody reads is refused, by every process,
// here the worker.
func TestCommon(t *testing.T) {
	t.Parallel()
	cfg := defaults(t)
	cfg.LogFormat = "xml"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "LOG_FORMAT") {
		t.Fatalf("err = %v", err)
	}
}

// processor sets c's processor to a's, its settings the defaults.
func processor(t *testing.T, c *Config, a gateway.Adapter) {
	t.Helper()
	var err error
	if c.Processor, err = process.NewProcessor(a); err != nil {
		t.Fatal(err)
	}
}

// stripeConfig points c at Stripe, as README's Stripe section does.
func stripeConfig(t *testing.T, c *Config) {
	processor(t, c, stripe.Adapter)
	c.Processor.Settings.(*stripe.Settings).APIKey = "sk_test_123"
}

// TestProcessorCalls: the worker's client of the processor is refused when
// the calls lack a setting they need, naming it.
func TestProcessorCalls(t *testing.T) {
	t.Parallel()
	cfg := defaults(t)
	stripeConfig(t, &cfg)
	if _, _, err := cfg.processor(nil); err != nil {
		t.Fatalf("Stripe with a key: %v", err)
	}
	cfg.Processor.Settings.(*stripe.Settings).APIKey = ""
	if _, _, err := cfg.processor(nil); err == nil || !strings.Contains(err.Error(), "STRIPE_API_KEY") {
		t.Fatalf("Stripe without a key: %v", err)
	}
}

// TestProcessorRateLimit: PROCESSOR_RATE_LIMIT is the processor's own limit
// unless set: Stripe's by the key's mode, none for the fake; a setting
// overrides it, and a negative one is refused.
func TestProcessorRateLimit(t *testing.T) {
	t.Parallel()
	rate := func(c Config) float64 {
		if p := c.pace(nil); p != nil {
			return p.Rate
		}
		return 0
	}
	cfg := defaults(t)
	if r := rate(cfg); r != 0 {
		t.Errorf("the fake processor: paced at %g a second, want none", r)
	}
	cfg.ProcessorRateLimit = 50
	if r := rate(cfg); r != 50 {
		t.Errorf("PROCESSOR_RATE_LIMIT=50: paced at %g", r)
	}
	stripeConfig(t, &cfg)
	cfg.ProcessorRateLimit = 0
	if r := rate(cfg); r != 25 {
		t.Errorf("Stripe in test mode: paced at %g, want 25", r)
	}
	cfg.Processor.Settings.(*stripe.Settings).APIKey = "sk_live_123"
	if r := rate(cfg); r != 100 {
		t.Errorf("Stripe in live mode: paced at %g, want 100", r)
	}
	cfg.ProcessorRateLimit = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PROCESSOR_RATE_LIMIT") {
		t.Errorf("a negative PROCESSOR_RATE_LIMIT: %v", err)
	}
}
