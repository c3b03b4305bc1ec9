//go:build unix

package chaos

import (
	"context"
	"errors"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestHelperProcess is not a test: run by TestProcNeverLeavesOneBehind as a
// process of the stack, it serves /healthz on CHAOS_HELPER_ADDR until killed.
func TestHelperProcess(t *testing.T) {
	addr := os.Getenv("CHAOS_HELPER_ADDR")
	if addr == "" {
		t.Skip("a helper process")
	}
	_ = http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	os.Exit(1)
}

// TestProcNeverLeavesOneBehind: a start while a run is still alive kills it
// first (the killer once started the receiver in the middle of its outage,
// whose own start then lost the run's handle on it, and that receiver
// outlived the run), and stop leaves nothing of its group.
func TestProcNeverLeavesOneBehind(t *testing.T) {
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// The helper is this test binary, running only TestHelperProcess.
	p, err := newProc("helper", "helper", os.Args[0], t.TempDir(), "http://"+addr+"/healthz", []string{"CHAOS_HELPER_ADDR=" + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.log.Close()
	p.args = []string{"-test.run=^TestHelperProcess$"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func() int {
		t.Helper()
		if err := p.start(ctx); err != nil {
			t.Fatal(err)
		}
		return p.cmd.Process.Pid
	}
	first := start()
	second := start()
	if first == second {
		t.Fatal("the same process twice")
	}
	if alive := syscall.Kill(first, 0); !errors.Is(alive, syscall.ESRCH) {
		t.Fatalf("the first run (pid %d) is still there after a second start: %v", first, alive)
	}
	p.stop()
	if alive := syscall.Kill(-second, 0); !errors.Is(alive, syscall.ESRCH) {
		t.Fatalf("the group of the second run (pid %d) is still there after stop: %v", second, alive)
	}
}
