package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/cmdtest"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	cmdtest.Help(t, run, "DATABASE_URL", "PROCESSOR_ADDR", "PROCESSOR_FAIL_RATE", "PROCESSOR_DROP_RATE",
		"PROCESSOR_LATENCY", "PROCESSOR_EXEC_LATENCY", "PROCESSOR_TIMEOUT_HANG", "PROCESSOR_KEY_RETENTION")
}

func TestRunBadConfig(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("PROCESSOR_ADDR", "127.0.0.1:0")
	t.Setenv("PROCESSOR_FAIL_RATE", "2")
	cmdtest.Refuses(t, run, "fail rate")
}
