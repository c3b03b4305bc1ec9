package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/bench"
	"github.com/example/payments/tools/testdb"
)

// TestRetention runs the retention mode alone with a few thousand keys: both
// runs measure, the reaper reaps every expired key and tombstone in batches
// of REAP_BATCH (in the window, or after it), and the payments outlive their
// keys.
func TestRetention(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const keys = 3000
	var out bytes.Buffer
	// Slices of a second: a batch that its slice's end cuts off rolls back
	// whole, and under the parallel suite on a slow machine a 300 ms slice
	// cut off the reaper's first batch (CI, 2026-11-27: nothing reaped).
	report, err := bench.Run(context.Background(), bench.Config{DatabaseURL: db.URL, Clients: 2, Duration: time.Second,
		RetentionKeys: keys, RetentionOnly: true}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r := report.Retention
	if r == nil || len(report.Results) != 0 {
		t.Fatalf("retention %v, %d other results:\n%s", r, len(report.Results), out.String())
	}
	for _, m := range []bench.Result{r.Baseline, r.Reaping} {
		if m.Ops == 0 || m.P99 <= 0 {
			t.Errorf("%s measured nothing", m.Mode)
		}
	}
	if r.P99Ratio <= 0 || r.Reaping.Ratio <= 0 {
		t.Errorf("no ratio: p99 %.2f, rate %.2f", r.P99Ratio, r.Reaping.Ratio)
	}
	// What the window left, the reaper reaped after it.
	if got := r.Expire.Rows + r.LeftExpired; got != keys {
		t.Errorf("expired %d in the window and %d left, want %d in all", r.Expire.Rows, r.LeftExpired, keys)
	}
	if got := r.Delete.Rows + r.LeftTombstones; got != keys {
		t.Errorf("deleted %d tombstones in the window and %d left, want %d in all", r.Delete.Rows, r.LeftTombstones, keys)
	}
	if r.Expire.Rows == 0 {
		t.Errorf("the reaper reaped nothing under load: %+v", r)
	}
	for _, s := range []bench.Stage{r.Expire, r.Delete, r.AloneExpire, r.AloneDelete} {
		if s.Batches > 0 && s.Rows > s.Batches*r.Batch {
			t.Errorf("%d rows in %d batches of at most %d", s.Rows, s.Batches, r.Batch)
		}
	}
	if r.AloneExpire.Rows != keys || r.AloneDelete.Rows != keys || r.AloneDelete.Mean() <= 0 {
		t.Errorf("alone: %+v, %+v", r.AloneExpire, r.AloneDelete)
	}
	var left, unset, payments int
	if err := db.Pool.QueryRow(context.Background(), `
SELECT (SELECT count(*) FROM idempotency_keys WHERE recovery_point IN ('finished', 'expired') AND expires_at < now()),
	(SELECT count(*) FROM payments WHERE idempotency_key_id IS NULL),
	(SELECT count(*) FROM payments WHERE id IN (SELECT resource_id FROM idempotency_keys) OR idempotency_key_id IS NULL)`).Scan(&left, &unset, &payments); err != nil {
		t.Fatal(err)
	}
	// Two sets of tombstones deleted (the mode's and the one reaped alone);
	// every payment is still there.
	if left != 0 || unset != 2*keys || payments < 4*keys {
		t.Errorf("%d expired keys left, %d payments without their key (want %d), %d payments", left, unset, 2*keys, payments)
	}
	if !strings.Contains(out.String(), "pace") {
		t.Errorf("no verdict:\n%s", out.String())
	}
}
