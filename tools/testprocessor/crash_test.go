package testprocessor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testprocessor"
)

// buildWorker builds the worker run against the test processor
// (testworker), under the race detector as the tests themselves are, so
// that it shares their build cache.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testworker")
	build := exec.Command("go", "build", "-race", "-o", bin, "./testworker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testworker: %v\n%s", err, out)
	}
	return bin
}

// worker is a running testworker.
type worker struct {
	cmd  *exec.Cmd
	out  *testio.Buffer
	done chan error
}

// startWorker runs bin with env added, until it exits or the test ends.
func startWorker(t *testing.T, bin string, env ...string) *worker {
	t.Helper()
	w := &worker{cmd: exec.Command(bin), out: &testio.Buffer{}, done: make(chan error, 1)}
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("--- testworker output ---\n%s", w.out.String())
		}
	})
	return w
}

// killed waits until w has died of SIGKILL, as a crash point does.
func (w *worker) killed(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.done:
		w.done <- err
		var exit *exec.ExitError
		ws, ok := w.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !errors.As(err, &exit) || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the worker ended with %v, not SIGKILL\n%s", err, w.out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not reach its crash point\n%s", w.out.String())
	}
}

// TestWorkerKilledAfterTheProcessorAnswered kills a real worker with
// SIGKILL once the test processor has answered its call and before
// anything is recorded, the one moment a worker's death can lose what the
// processor did, and starts another: with no lookup to ask, it learns the
// outcome by making the call again under the same key, and the processor
// answers with what it did. One payment is made, and it ends succeeded.
func TestWorkerKilledAfterTheProcessorAnswered(t *testing.T) {
	t.Parallel()
	srv := testprocessor.NewServer(t)
	settings := srv.Settings()
	s := stacktest.New(t, stacktest.Options{Processor: settings})
	bin := buildWorker(t)
	env := []string{"DATABASE_URL=" + s.DB.URL, "WEBHOOK_SECRETS_KEY=" + stacktest.SecretsKey, "METRICS_ADDR=127.0.0.1:0",
		"TESTPROCESSOR_URL=" + srv.URL, "TESTPROCESSOR_HMAC_KEY=" + string(settings.HMACKey),
		"WORKER_POLL_INTERVAL=100ms", "PROCESSOR_TIMEOUT=1s", "JOB_TIMEOUT=2s", "RETRY_BASE_DELAY=100ms",
		"RETRY_MAX_DELAY=500ms", "RECONCILE_INTERVAL=500ms", "RECONCILE_STUCK_AFTER=3s"}

	dying := startWorker(t, bin, append(env, "APP_ENV=test", "CRASH_POINT=payment_after_processor_response")...)
	id := pay(t, s, "killed-worker", "tok_visa")
	key := "charge_" + id
	dying.killed(t)
	if st, _ := status(t, s, id); st != operation.StatusProcessing || srv.Made(key) != 1 {
		t.Fatalf("after the kill: payment %s, %d made; want processing, and made once", st, srv.Made(key))
	}

	startWorker(t, bin, env...)
	stacktest.WaitFor(t, "the next worker settling the payment", func() bool {
		st, _ := status(t, s, id)
		return st == operation.StatusSucceeded
	})
	if srv.Made(key) != 1 || srv.Posts(key) < 2 {
		t.Fatalf("%d payments made under %d requests; want 1 made, the call made again", srv.Made(key), srv.Posts(key))
	}
	if p := s.RecoveryPoint(stacktest.AcmeID, "killed-worker"); p != "finished" {
		t.Fatalf("recovery point %s", p)
	}
	nothingUnexpected(t, srv)
}
