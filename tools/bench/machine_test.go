package bench

import "testing"

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
