package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestReconcilerOutlivesDeadWorker: a worker killed with SIGKILL in the
// middle of a reconcile pass, its batch claimed, holds up no other worker's
// reconciliation: another worker's next pass settles what the dead one had
// claimed within seconds. (A periodic River job, unique while it ran, left
// reconciliation to wait for the dead leader's term to expire and for River
// to rescue its run: 15 s and more, a minute in the long chaos run.)
func TestReconcilerOutlivesDeadWorker(t *testing.T) {
	t.Parallel()
	// Every charge is refused at first: the worker's one attempt hands the
	// payment to the reconciler, whose pass claims it and dies.
	s := startStack(t, testdb.New(t).URL, nil,
		[]string{"APP_ENV=test", "CRASH_POINT=reconcile_claimed", "OPERATION_MAX_ATTEMPTS=1"}, "PROCESSOR_FAIL_RATE=1")
	p := s.payAsync(t, "orphan")
	s.worker.killed(t)

	// The processor is well again; another worker starts.
	s.processor.stop(t)
	s.startProcessor()
	started := time.Now()
	s.startWorker()
	testwait.Poll(t, started.Add(8*time.Second), 100*time.Millisecond, func() error {
		_, _, body := do(t, http.MethodGet, s.apiURL+"/v1/payments/"+p.ID, "sk_test_acme", "", "")
		var got struct{ Status string }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("payment %s: %v", body, err)
		}
		if got.Status == "succeeded" {
			return nil
		}
		return fmt.Errorf("payment still %s %s after the dead worker's replacement started", got.Status, time.Since(started).Round(time.Millisecond))
	})
	t.Logf("settled %s after the second worker started", time.Since(started).Round(time.Millisecond))
	if charges := chargesFor(t, s, p.ID); len(charges) != 1 {
		t.Fatalf("processor charges for %s: %v", p.ID, charges)
	}
}
