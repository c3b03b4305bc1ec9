package bench_test

import (
	"testing"
	"time"

	"github.com/example/payments/tools/bench"
)

// TestFloors reads each floor off results on either side of its bound: a
// floor that read the wrong mode, or compared the wrong way, fails here.
func TestFloors(t *testing.T) {
	t.Parallel()
	results := func(newKeys, replays, e2e, slow float64, p99 time.Duration, big float64) []bench.Result {
		const insert, bare = "ceiling: one-row INSERT (pgx), in turns", "reference: bare HTTP handler, one SELECT, in turns"
		return []bench.Result{
			{Mode: "ceiling: one-row INSERT (pgx)", PerSecond: 10000},
			{Mode: "reference: bare HTTP handler, one SELECT", PerSecond: 20000, Ceiling: "ceiling: point SELECT (pgx)", Ratio: 0.25},
			{Mode: "new keys, async, worker stopped", Ceiling: insert, Ratio: newKeys},
			{Mode: insert, PerSecond: 10000},
			// The limited mode is a ratio to new keys: not the big table.
			{Mode: "new keys, async, worker stopped, tenant limit on", Ceiling: "new keys, async, worker stopped", Ratio: 0.5},
			{Mode: "replays", Ceiling: bare, Ratio: replays},
			{Mode: bare, PerSecond: 20000},
			{Mode: "payments end to end", Ceiling: insert, Ratio: e2e},
			{Mode: "payments end to end, 512 clients, worker at its defaults, processor at 500 ms", Ratio: slow,
				Ceiling: "payments end to end, 512 clients, worker at its defaults, processor at 0 ms"},
			{Mode: "payments end to end, 4 clients", P99: p99, Ceiling: "ceiling: one-row INSERT (pgx)", Ratio: 0.01},
			// Each new-key mode is a ratio to its own turns of the insert
			// ceiling: the floor divides the two.
			{Mode: "new keys, async, 1000 finished keys", Ceiling: insert, Ratio: big * newKeys},
		}
	}
	held := func(floors []bench.Floor) []bool {
		var h []bool
		for _, f := range floors {
			if f.Measured == "" {
				t.Errorf("%s: not measured", f.What)
			}
			h = append(h, f.Held)
		}
		return h
	}
	pass := held(bench.Floors(results(0.181, 0.71, 0.041, 0.81, 24*time.Millisecond, 1.19), 99<<20))
	fail := held(bench.Floors(results(0.179, 0.69, 0.039, 0.79, 26*time.Millisecond, 0.79), 100<<20))
	if len(pass) != 7 {
		t.Fatalf("%d floors, want 7", len(pass))
	}
	for i := range pass {
		if !pass[i] || fail[i] {
			t.Errorf("floor %d: held %v above its bound and %v below it", i, pass[i], fail[i])
		}
	}
	if big := bench.Floors(results(0.2, 0.8, 0.05, 0.9, time.Millisecond, 1.21), 1<<20)[5]; big.Held {
		t.Errorf("the big table held at 1.21: %+v", big)
	}
	for _, f := range bench.Floors(nil, 0) {
		if f.Held || f.Measured != "" {
			t.Errorf("%s: measured %q, held %v, in a run that measured nothing", f.What, f.Measured, f.Held)
		}
	}
}
