package operation_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/tools/testwait"
)

// stage starts n payments, whose jobs wait in the outbox, and returns their
// ids.
func (h *harness) stage(n int) []string {
	h.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.start("pm_card_visa").Key.Resource.ID
	}
	return ids
}

// TestRelayRace: relays racing over one outbox, as those of several workers
// do, put each staged job in River's queue exactly once, and name it on its
// key; the outbox ends empty. Staged operations count in the backlog.
func TestRelayRace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	inserter, err := jobs.NewInserter(h.db.Pool, jobs.RelayCooldown, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	const staged = 120
	h.stage(staged)
	h.exec(`UPDATE idempotency_keys SET created_at = created_at - interval '1 minute'`)
	if oldest, _, err := operation.Backlog(t.Context(), h.db.Pool); err != nil || oldest < time.Minute {
		t.Fatalf("backlog with staged operations: oldest %s, %v; want a minute", oldest, err)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		moved int
	)
	for range 4 {
		relay := &outbox.Relay{DB: h.db.Pool, Jobs: jobs.Queue{Client: inserter}, BatchSize: 7}
		wg.Go(func() {
			<-start
			n, err := relay.Drain(t.Context())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			moved += n
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if moved != staged {
		t.Fatalf("moved %d, want %d", moved, staged)
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = 'drive_operation'`); n != staged {
		t.Fatalf("jobs = %d, want one for each of the %d payments", n, staged)
	}
	if n := h.count(`SELECT count(*) FROM idempotency_keys k JOIN river_job j ON j.id = k.job_id
WHERE j.args->>'id' = k.resource_id AND j.args->>'resource_type' = 'payment'`); n != staged {
		t.Fatalf("keys naming their own job = %d, want %d", n, staged)
	}
	if n := h.count(`SELECT count(*) FROM operation_outbox`); n != 0 {
		t.Fatalf("outbox rows left = %d", n)
	}
}

// TestRelayDoorbell: a first phase's commit rings the relays, which move its
// job at once rather than at their next poll (an hour here).
func TestRelayDoorbell(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t)
	relay := &outbox.Relay{DB: h.db.Pool, Jobs: h.jobs, BatchSize: 10, Session: h.db.Pool, Poll: time.Hour,
		Logger: testLogger(t)}
	doorbell := outbox.NewDoorbell(h.db.Pool, time.Millisecond, testLogger(t))
	h.svc.Doorbell = doorbell
	go doorbell.Run(ctx)
	go relay.Run(ctx)
	// The relay looks as it starts and as its listener connects; once it
	// has moved the first payment's job, only the doorbell can wake it.
	for range 4 {
		id := h.stage(1)[0]
		testwait.Within(t, 10*time.Second, "the relay to move "+id, func() bool {
			return h.count(`SELECT count(*) FROM idempotency_keys WHERE resource_id = $1 AND job_id IS NOT NULL`, id) == 1
		})
	}
}
