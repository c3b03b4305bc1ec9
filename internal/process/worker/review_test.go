package worker

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/testdb"
)

// TestReview lists the needs-review queue, resolves a case, and counts each
// case once in the metric, whichever process reads it.
func TestReview(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	list := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := Review(t.Context(), process.Common{DatabaseURL: db.URL}, args, &out); err != nil {
			t.Fatalf("review %v: %v", args, err)
		}
		return out.String()
	}
	if out := list(); !strings.Contains(out, "nothing needs review") {
		t.Fatalf("empty queue: %q", out)
	}
	db.Exec(t, `INSERT INTO needs_review (kind, reference, detail) VALUES
		('unknown_charge', 'ch_1', 'a charge nobody asked for'), ('payment_given_up', 'pay_1', 'gave up')`)
	out := list()
	if !strings.Contains(out, "unknown_charge") || !strings.Contains(out, "ch_1") || !strings.Contains(out, "pay_1") {
		t.Fatalf("open cases: %q", out)
	}
	var id string
	if err := db.Pool.QueryRow(t.Context(), `SELECT id::text FROM needs_review WHERE reference = 'ch_1'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	list("resolve", id)
	if out := list(); strings.Contains(out, "ch_1") || !strings.Contains(out, "pay_1") {
		t.Fatalf("after resolving ch_1: %q", out)
	}
	if out := list("-all"); !strings.Contains(out, "ch_1") {
		t.Fatalf("-all: %q", out)
	}
	if err := Review(t.Context(), process.Common{DatabaseURL: db.URL}, []string{"resolve", id}, &bytes.Buffer{}); err == nil {
		t.Fatal("resolving a resolved case succeeded")
	}

	// Resolved cases still count: the metric is every case ever recorded;
	// every kind of case of every kind of operation is there, from zero.
	kinds := catalog.Kinds(nil).ReviewKinds()
	reg := prometheus.NewRegistry()
	reg.MustRegister(reviewCollector(db.Pool, kinds))
	want := `
# HELP payments_needs_review_total Cases ever added to the needs-review queue, by kind: each distinct case once, however often it was detected.
# TYPE payments_needs_review_total counter
`
	slices.Sort(kinds)
	for _, kind := range kinds {
		n := 0
		if kind == "payment_given_up" || kind == "unknown_charge" {
			n = 1
		}
		want += fmt.Sprintf("payments_needs_review_total{kind=%q} %d\n", kind, n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "payments_needs_review_total"); err != nil {
		t.Fatal(err)
	}
}
