package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/cmdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHelp lists the variables the API reads.
func TestHelp(t *testing.T) {
	t.Parallel()
	cmdtest.Help(t, run, "DATABASE_URL", "API_ADDR", "IDEMPOTENCY_KEY_RETENTION", "TENANT_RATE_LIMIT", "LOG_FORMAT")
}
