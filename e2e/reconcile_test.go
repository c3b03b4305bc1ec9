package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
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
	s.processor = start(t, "fakeprocessor", []string{s.db, "PROCESSOR_ADDR=" + s.procAddr, "PROCESSOR_INTERNAL_ADDR=127.0.0.1:0"})
	waitHealthy(t, s.processorURL+"/healthz", s.processor)
	started := time.Now()
	s.startWorker()
	for {
		_, _, body := do(t, http.MethodGet, s.apiURL+"/v1/payments/"+p.ID, "sk_test_acme", "", "")
		var got struct{ Status string }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("payment %s: %v", body, err)
		}
		if got.Status == "succeeded" {
			break
		}
		if time.Since(started) > 8*time.Second {
			t.Fatalf("payment still %s %s after the dead worker's replacement started", got.Status, time.Since(started).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("settled %s after the second worker started", time.Since(started).Round(time.Millisecond))
	_, _, charges := do(t, http.MethodGet, s.processorURL+"/v1/charges?payment_id="+p.ID, "", "", "")
	var list struct{ Data []json.RawMessage }
	if err := json.Unmarshal(charges, &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("processor charges for %s: %s", p.ID, charges)
	}
}
