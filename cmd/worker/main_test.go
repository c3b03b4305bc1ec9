package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/cmdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHelp lists the variables the worker reads.
func TestHelp(t *testing.T) {
	t.Parallel()
	cmdtest.Help(t, run, "DATABASE_URL", "METRICS_ADDR", "IDEMPOTENCY_KEY_RETENTION", "PROCESSOR_KEY_RETENTION",
		"OPERATION_DEADLINE", "LOG_FORMAT", "RIVER_UI_USER", "RIVER_UI_PASSWORD",
		// Each processor's own settings, under its name.
		"With PROCESSOR=fake", "PROCESSOR_URL", "PROCESSOR_WEBHOOK_SECRET", "With PROCESSOR=stripe", "STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET")
}

// TestUnknownProcessor: a processor the service has no adapter for is
// refused at start, naming the ones it has; nothing falls through to the
// fake processor.
func TestUnknownProcessor(t *testing.T) {
	t.Setenv("PROCESSOR", "nope")
	cmdtest.Refuses(t, run, `PROCESSOR ("nope") names no processor of this service: it must be one of fake, stripe`)
}
