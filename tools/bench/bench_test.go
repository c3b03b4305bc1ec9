package bench_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
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
	report, err := bench.Run(context.Background(), bench.Config{DatabaseURL: db.URL, Clients: 2, Duration: 300 * time.Millisecond, BigTable: 1000}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkResults(t, report, out.String())
	checkExplained(t, report, out.String())
	checkHops(t, report, out.String())
	checkCPU(t, report, out.String())
}

// checkResults checks the modes' results, the table and the floors of a
// run that wrote out.
func checkResults(t *testing.T, report bench.Report, out string) {
	t.Helper()
	results := report.Results
	// Thirteen modes, four of them in turns with a reference of their own.
	if len(results) != 17 {
		t.Fatalf("%d results, want 17:\n%s", len(results), out)
	}
	for _, r := range results {
		if r.Ops == 0 || r.PerSecond <= 0 {
			t.Errorf("%s measured nothing", r.Mode)
		}
		if r.Ceiling != "" && r.Ratio <= 0 {
			t.Errorf("%s has no ratio", r.Mode)
		}
	}
	// A mode measured in turns is followed by its reference, measured in
	// the same turns: what its ratio divides by.
	turns := 0
	for i, r := range results {
		if strings.HasSuffix(r.Ceiling, ", in turns") {
			turns++
			if i+1 >= len(results) || results[i+1].Mode != r.Ceiling {
				t.Errorf("%s: its reference %q does not follow it", r.Mode, r.Ceiling)
			} else if want := r.PerSecond / results[i+1].PerSecond; r.Ratio != want {
				t.Errorf("%s: ratio %.3f, want %.3f", r.Mode, r.Ratio, want)
			}
		}
	}
	if turns != 4 {
		t.Errorf("%d modes in turns with a reference, want 4:\n%s", turns, out)
	}
	if !strings.Contains(out, "ratio") {
		t.Errorf("no table:\n%s", out)
	}
	// Every floor is read off the run, whether it held or not.
	if len(report.Floors) != 7 {
		t.Errorf("%d floors, want 7:\n%s", len(report.Floors), out)
	}
	for _, f := range report.Floors {
		if f.Measured == "" {
			t.Errorf("floor %q not measured:\n%s", f.What, out)
		}
	}
}

// checkExplained checks where the explained modes' time went: the round
// trips, counted on the wire, are what TestRoundTrips counts through pgx (a
// replay is its key's one read); the statements come when the server has
// pg_stat_statements loaded.
func checkExplained(t *testing.T, report bench.Report, out string) {
	t.Helper()
	if len(report.Explained) != 3 {
		t.Fatalf("%d modes explained, want 3:\n%s", len(report.Explained), out)
	}
	newKeys, replays := report.Explained[0], report.Explained[1]
	if replays.RoundTrips != 1 {
		t.Errorf("a replay made %.2f round trips, want 1", replays.RoundTrips)
	}
	if newKeys.RoundTrips < 2 || newKeys.RoundTrips > 6 {
		t.Errorf("a new key made %.2f round trips, want 2 to 6", newKeys.RoundTrips)
	}
	for _, e := range report.Explained {
		for _, s := range e.Statements {
			if s.PerRequest <= 0 || s.Query == "" {
				t.Errorf("%s: statement %+v", e.Mode, s)
			}
		}
	}
}

// checkHops checks where the 4-client payments' time went: four hops and
// the whole, each stamped by the database, the whole no shorter than any hop.
func checkHops(t *testing.T, report bench.Report, out string) {
	t.Helper()
	if len(report.Hops) != 5 {
		t.Fatalf("%d hops, want 5:\n%s", len(report.Hops), out)
	}
	whole := report.Hops[4]
	for _, h := range report.Hops {
		if h.P50 < 0 || h.P50 > whole.P99 {
			t.Errorf("hop %q: p50 %v against the whole's p99 %v", h.Name, h.P50, whole.P99)
		}
	}
	if whole.P50 <= 0 {
		t.Errorf("the whole took %v", whole.P50)
	}
	// And outside the database's clock: each request is timed by the client
	// from before its first phase began to after its key finished, so the
	// whole by the client is no shorter than by the database; each part is
	// positive (its key's announcement heard, one clock).
	if len(report.ClientHops) != 4 {
		t.Fatalf("%d hops by the client, want 4:\n%s", len(report.ClientHops), out)
	}
	client := report.ClientHops[3]
	for _, h := range report.ClientHops {
		if h.P50 <= 0 || h.P50 > client.P99 {
			t.Errorf("hop %q: p50 %v against the whole's p99 %v, by the client", h.Name, h.P50, client.P99)
		}
	}
	if client.P50 < whole.P50 {
		t.Errorf("the whole by the client %v, shorter than by the database %v", client.P50, whole.P50)
	}
}

// checkCPU checks what the modes cost the processors.
func checkCPU(t *testing.T, report bench.Report, out string) {
	t.Helper()
	// What the modes in turns, the 4-client mode and the slow processor's
	// two cost the processors, on
	// Linux: some share of them busy, and a request some time of theirs and
	// of this process's; some of Postgres's too, when it runs on this machine.
	if _, err := os.Stat("/proc/stat"); err == nil {
		var modes []string
		for _, r := range report.Results {
			if strings.HasSuffix(r.Ceiling, ", in turns") || r.Clients == 4 || r.Clients == 512 {
				modes = append(modes, r.Mode)
			}
		}
		if len(modes) != 7 || len(report.CPU) != len(modes) {
			t.Errorf("processors read for %d modes, want %d (%q)", len(report.CPU), len(modes), modes)
		}
		local := localPostgres(t)
		for _, mode := range modes {
			c, ok := report.CPU[mode]
			if !ok || c.Cores < 1 || c.Busy <= 0 || c.Busy > 1 || c.PerOp <= 0 || c.ProcessPerOp <= 0 || c.SwitchesPerOp <= 0 {
				t.Errorf("%s: processors %+v\n%s", mode, c, out)
			}
			if local && (c.PostgresPerOp <= 0 || c.PostgresPerOp > c.PerOp*time.Duration(c.Cores)) {
				t.Errorf("%s: Postgres's processes %v a request, of %v on the machine", mode, c.PostgresPerOp, c.PerOp)
			}
			if !strings.Contains(out, mode+": the machine's") {
				t.Errorf("%s: the processors' line is not printed:\n%s", mode, out)
			}
		}
	}
}

// localPostgres reports whether the server the tests use runs on this
// machine where its processes can be read: it names its own backend's
// process, and /proc has it.
func localPostgres(t *testing.T) bool {
	db := testdb.New(t)
	var pid int
	if err := db.Pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && strings.Contains(string(stat), "(postgres)")
}

// TestCount: each of benchcount's modes answers as it should on a database
// PrepareCount readied (Count fails on any other status), the replay from
// the key PrepareCount finished; a mode that does not exist is an error.
func TestCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if err := bench.PrepareCount(ctx, db.URL); err != nil {
		t.Fatal(err)
	}
	for _, mode := range bench.CountModes {
		if allocs, err := bench.Count(ctx, db.URL, mode, 3); err != nil || allocs == 0 {
			t.Errorf("%s: %d allocations, %v", mode, allocs, err)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE key LIKE 'count-%' AND key <> 'count-replay'`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d new keys, want 3 (%v)", n, err)
	}
	if _, err := bench.Count(ctx, db.URL, "nothing", 1); err == nil {
		t.Error("a mode that does not exist ran")
	}
}
