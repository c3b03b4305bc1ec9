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
		"OPERATION_DEADLINE", "LOG_FORMAT", "RIVER_UI_USER", "RIVER_UI_PASSWORD")
}
