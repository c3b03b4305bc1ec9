package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestOperationOutlivesDeadWorkersJob: a worker killed with SIGKILL in the
// middle of a payment's job, once the processor has charged, leaves the job
// running in River's table until River's rescuer comes by: the leader's,
// which passes every 30 s and takes a job once it has run for RescueAfter
// (7 s here, with JOB_TIMEOUT=2s). The dead worker was the leader, and its
// term outlives it by 10 s or more. The payment does not wait for either:
// the replacement worker's sweep hands it to the reconciler once the job
// has run for RescueAfter, and the reconciler settles it while River's job
// is still running, with the processor's one charge.
func TestOperationOutlivesDeadWorkersJob(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	s := startStack(t, db.URL, nil, []string{"APP_ENV=test", "CRASH_POINT=payment_after_processor_response"})
	p := s.payAsync(t, "dead-job")
	s.worker.killed(t)
	killed := time.Now()
	s.startWorker()

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var settledBy, jobState string
	testwait.Poll(t, killed.Add(40*time.Second), 100*time.Millisecond, func() error {
		err := conn.QueryRow(ctx, `
SELECT coalesce(p.settled_by, ''), j.state FROM payments p
JOIN idempotency_keys k ON k.resource_type = 'payment' AND k.resource_id = p.id
JOIN river_job j ON j.id = k.job_id WHERE p.id = $1`, p.ID).Scan(&settledBy, &jobState)
		if err != nil {
			t.Fatal(err)
		}
		if settledBy != "" {
			return nil
		}
		return fmt.Errorf("payment unsettled %s after its worker died (job %s)", time.Since(killed).Round(time.Millisecond), jobState)
	})
	t.Logf("settled by the %s %s after the worker died, its job %s", settledBy, time.Since(killed).Round(time.Millisecond), jobState)
	if settledBy != "reconciler" || jobState != "running" {
		t.Fatalf("settled by the %s, the dead worker's job %s: want the reconciler, before River rescued the job", settledBy, jobState)
	}
	if charges := chargesFor(t, s, p.ID); len(charges) != 1 {
		t.Fatalf("processor charges for %s: %v", p.ID, charges)
	}
}
