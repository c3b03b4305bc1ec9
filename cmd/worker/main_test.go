package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHelp lists the variables the worker reads.
func TestHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, v := range []string{"DATABASE_URL", "METRICS_ADDR", "IDEMPOTENCY_KEY_RETENTION", "PROCESSOR_KEY_RETENTION", "OPERATION_DEADLINE", "LOG_FORMAT", "RIVER_UI_USER", "RIVER_UI_PASSWORD"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h lacks %s:\n%s", v, out.String())
		}
	}
}
