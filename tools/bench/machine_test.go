package bench

import "testing"

// TestParseStat reads the processors' counters as Linux writes them: busy is
// all but idle and I/O wait, guest time is not counted twice, and each cpuN
// line is a core.
func TestParseStat(t *testing.T) {
	const stat = `cpu  100 10 50 800 40 5 5 0 30 0
cpu0 50 5 25 400 20 3 2 0 15 0
cpu1 50 5 25 400 20 2 3 0 15 0
intr 12345 0 0
ctxt 999
`
	busy, total, cores, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if busy != 170 || total != 1010 || cores != 2 {
		t.Errorf("busy %v, total %v, cores %d; want 170, 1010, 2", busy, total, cores)
	}
	if _, _, _, err := parseStat("intr 1 2 3\n"); err == nil {
		t.Error("no cpu line: no error")
	}
}
