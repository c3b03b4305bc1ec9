package bench

import (
	"testing"
	"time"
)

// TestParseStat reads the processors' counters as Linux writes them: busy is
// all but idle and I/O wait, guest time is not counted twice, each cpuN line
// is a core, and ctxt is the context switches.
func TestParseStat(t *testing.T) {
	const stat = `cpu  100 10 50 800 40 5 5 0 30 0
cpu0 50 5 25 400 20 3 2 0 15 0
cpu1 50 5 25 400 20 2 3 0 15 0
intr 12345 0 0
ctxt 999
`
	s, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{busy: 170, total: 1010, cores: 2, switches: 999}); s != want {
		t.Errorf("%+v, want %+v", s, want)
	}
	if _, err := parseStat("intr 1 2 3\n"); err == nil {
		t.Error("no cpu line: no error")
	}
}

// TestPostgresStat reads a process's start time and processor time from its
// /proc stat line, only for a process named postgres, whatever its name's
// spaces and parentheses would do to a naive split.
func TestPostgresStat(t *testing.T) {
	const backend = "4242 (postgres) S 100 4242 4242 0 -1 4194560 1503 0 0 0 170 30 0 0 20 0 1 0 9000 230000000 3000 18446744073709551615"
	if start, ticks, ok := postgresStat(backend); !ok || start != "9000" || ticks != 200 {
		t.Errorf("backend: started %s, %v ticks, %v; want 9000, 200, true", start, ticks, ok)
	}
	for _, line := range []string{
		"4243 (bench) S 1 4243 4243 0 -1 4194560 1503 0 0 0 170 30 0 0 20 0 1 0 9000 230000000 3000",
		"4244 (not postgres) S 1 4243 4243 0 -1 4194560 1503 0 0 0 170 30 0 0 20 0 1 0 9000 230000000 3000",
		"4245 (postgres) S 1 4243",
		"garbage",
	} {
		if _, ticks, ok := postgresStat(line); ok {
			t.Errorf("%q: read as Postgres's, %v ticks", line, ticks)
		}
	}
}

// TestTicksSince: what Postgres's processes used between two readings counts
// the processes alive at the second, a new one whole, and never goes
// backwards when a backend exits (another client's, or a pid reused).
func TestTicksSince(t *testing.T) {
	then := map[proc]float64{{"10", "100"}: 50, {"11", "100"}: 70, {"12", "100"}: 900}
	now := map[proc]float64{
		{"10", "100"}: 80, // ran 30 more
		{"11", "100"}: 70, // idle
		{"12", "500"}: 5,  // pid 12 exited with its 900 and was reused
		{"13", "600"}: 20, // new
	}
	if got := ticksSince(then, now); got != 55 {
		t.Errorf("ticksSince = %v, want 55", got)
	}
}

// TestCPUUse: spans of one mode add up, and a request's share of each
// process is its ticks over the requests.
func TestCPUUse(t *testing.T) {
	var u cpuUse
	for range 2 {
		u.add(cpuUse{elapsed: time.Second, stat: procStat{busy: 150, total: 200, cores: 2, switches: 1000}, postgres: 90, self: 400 * time.Millisecond})
	}
	c, err := u.per(100)
	if err != nil {
		t.Fatal(err)
	}
	// 2 s on 2 cores 75% busy: 3 s of processor time over 100 requests.
	want := CPU{Cores: 2, Busy: 0.75, PerOp: 30 * time.Millisecond, PostgresPerOp: 18 * time.Millisecond, ProcessPerOp: 8 * time.Millisecond, SwitchesPerOp: 20}
	if c != want {
		t.Errorf("%+v, want %+v", c, want)
	}
	if _, err := (cpuUse{}).per(100); err == nil {
		t.Error("nothing measured: no error")
	}
}
