package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/bench"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs every mode briefly: the tool measures, and every mode gets
// the answers it expects (a mode whose requests fail reports an error).
func TestRun(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var out bytes.Buffer
	results, err := bench.Run(context.Background(), bench.Config{DatabaseURL: db.URL, Clients: 2, Duration: 300 * time.Millisecond, BigTable: 1000}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(results) != 9 {
		t.Fatalf("%d results, want 9:\n%s", len(results), out.String())
	}
	for _, r := range results {
		if r.Ops == 0 || r.PerSecond <= 0 {
			t.Errorf("%s measured nothing", r.Mode)
		}
		if r.Ceiling != "" && r.Ratio <= 0 {
			t.Errorf("%s has no ratio", r.Mode)
		}
	}
	if !strings.Contains(out.String(), "ratio") {
		t.Errorf("no table:\n%s", out.String())
	}
}
