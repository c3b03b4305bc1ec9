package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"DATABASE_URL", "PROCESSOR_ADDR", "PROCESSOR_FAIL_RATE", "PROCESSOR_DROP_RATE",
		"PROCESSOR_LATENCY", "PROCESSOR_EXEC_LATENCY", "PROCESSOR_TIMEOUT_HANG", "PROCESSOR_KEY_RETENTION"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not list %s:\n%s", name, out.String())
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("PROCESSOR_ADDR", "127.0.0.1:0")
	t.Setenv("PROCESSOR_FAIL_RATE", "2")
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "fail rate") {
		t.Errorf("err = %v, want a fail rate error", err)
	}
}
