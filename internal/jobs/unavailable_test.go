package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/stacktest"
)

// proxied is a pool on the stack's database through a proxy the test cuts,
// as a failover cuts every connection and refuses new ones for a while.
func proxied(t *testing.T, s *stacktest.Stack) (*pgxpool.Pool, *stacktest.Proxy) {
	t.Helper()
	u, err := url.Parse(s.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := stacktest.NewProxy(t, u.Host)
	u.Host = p.Addr()
	pool, err := database.Open(t.Context(), u.String(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, p
}

// snoozed is the snooze err asks for; it fails t when err is no snooze.
func snoozed(t *testing.T, what string, err error) time.Duration {
	t.Helper()
	var snooze *rivertype.JobSnoozeError
	if !errors.As(err, &snooze) {
		t.Fatalf("%s: %v, want a snooze, which River does not count as an attempt", what, err)
	}
	return snooze.Duration
}

// TestDeliveryWhileTheDatabaseIsAway: a delivery whose claim, or whose
// record, breaks because the database went away (its connections cut, new
// ones refused) spends no attempt and no step of its schedule: its job
// snoozes for the worker's backoff, not River's count, and once the database
// is back the attempt is made under the same number, and a failure waits the
// schedule's first step, not its second.
func TestDeliveryWhileTheDatabaseIsAway(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Minute, time.Hour}})
	var (
		hits   atomic.Int64
		cutNow atomic.Pointer[stacktest.Proxy]
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if p := cutNow.Swap(nil); p != nil {
			p.Cut() // the database goes away while the POST is in flight
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)
	b, _ := json.Marshal(map[string]any{"url": receiver.URL + "/hooks", "enabled_events": []string{"*"}})
	if res := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, string(b), "Idempotency-Key", "we-1"); res.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	event := operation.NewID("evt_")
	s.Exec(`INSERT INTO events (id, tenant_id, type, resource_id, data, created_at) VALUES ($1, $2, 'payment.succeeded', 'pay_1', '{}', now())`,
		event, stacktest.AcmeID)
	delivery := int64(s.Count(`INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status)
		SELECT tenant_id, id, $1, 'pending' FROM webhook_endpoints RETURNING id`, event))

	pool, proxy := proxied(t, s)
	d := *s.Deliverer
	d.DB = pool
	w := &jobs.DeliveryWorker{Deliverer: &d, Backoff: jobs.Backoff{Base: time.Second, Max: time.Second}}
	job := &river.Job[jobs.DeliveryArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1}, Args: jobs.DeliveryArgs{DeliveryID: delivery}}
	ctx := context.Background()
	attempts := func() int {
		return s.Count(`SELECT attempts FROM webhook_deliveries WHERE id = $1`, delivery) +
			s.Count(`SELECT count(*) FROM webhook_delivery_attempts WHERE delivery_id = $1`, delivery)
	}

	t.Run("Claim", func(t *testing.T) {
		proxy.Cut()
		err := w.Work(ctx, job)
		proxy.Restore()
		if wait := snoozed(t, "a claim on a database gone", err); wait > time.Second {
			t.Errorf("snoozed %s, want the backoff's first delay (1s at most)", wait)
		}
		if hits.Load() != 0 || attempts() != 0 {
			t.Fatalf("%d POSTs, %d attempts counted or logged: nothing should be", hits.Load(), attempts())
		}
	})
	t.Run("Record", func(t *testing.T) {
		cutNow.Store(proxy)
		err := w.Work(ctx, job)
		proxy.Restore()
		snoozed(t, "a record on a database gone", err)
		if hits.Load() != 1 || attempts() != 0 {
			t.Fatalf("%d POSTs, %d attempts counted or logged: want the POST, and no attempt recorded", hits.Load(), attempts())
		}
	})
	t.Run("Back", func(t *testing.T) {
		// The attempt made again under its number, its failure waiting the
		// schedule's first step (a minute, ±10%), not its second (an hour).
		wait := snoozed(t, "a failed attempt", w.Work(ctx, job))
		if wait < 54*time.Second || wait > 66*time.Second {
			t.Fatalf("the next attempt in %s, want the first step's minute", wait)
		}
		if n := s.Count(`SELECT attempt FROM webhook_delivery_attempts WHERE delivery_id = $1`, delivery); n != 1 || hits.Load() != 2 {
			t.Fatalf("attempt %d logged after %d POSTs, want attempt 1 after 2", n, hits.Load())
		}
	})
}

// TestOperationWhileTheDatabaseIsAway: an operation's job whose run fails
// only because the database went away, on its budget's last attempt, is not
// handed to the reconciler: the attempt is not spent, and the job snoozes.
// Once the database is back, the same attempt settles the payment.
func TestOperationWhileTheDatabaseIsAway(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 1})
	p := acceptedPayment(t, s, "away")
	// The operation is read through the stack's pool, and its key's phases
	// run through the proxy: the database goes away between the two.
	pool, proxy := proxied(t, s)
	keys := *s.Keys
	keys.DB, keys.Reads = pool, nil
	ops := *s.Ops
	ops.Keys = &keys
	w, job := firstAttempt(&ops, p.ID)

	proxy.Cut()
	err := w.Work(context.Background(), job)
	proxy.Restore()
	snoozed(t, "the budget's last attempt on a database gone", err)
	if marked(s, p.ID) {
		t.Fatal("handed to the reconciler: a database that went away spent the retry budget")
	}
	if err := w.Work(context.Background(), job); err != nil {
		t.Fatalf("the same attempt, the database back: %v", err)
	}
	if n := s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND status = 'succeeded'`, p.ID); n != 1 || marked(s, p.ID) {
		t.Fatalf("%d payments succeeded, marked %v: want it settled by its worker", n, marked(s, p.ID))
	}
}

// TestOperationPastItsOwnDeadline: an operation's job whose run is cut by
// the job's own deadline (a statement that outlasts JOB_TIMEOUT: a lock a
// stuck session holds, say) fails as a network timeout, but the database
// did not go away: the attempt is spent, and on the budget's last one the
// operation is handed to the reconciler, never snoozed for ever.
func TestOperationPastItsOwnDeadline(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 1})
	p := acceptedPayment(t, s, "own-deadline")
	// A stuck session holds the payment's key.
	stuck, err := s.DB.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Rollback(context.Background()) //nolint:errcheck // the test's own
	if _, err := stuck.Exec(t.Context(), `SELECT 1 FROM idempotency_keys WHERE resource_id = $1 FOR UPDATE`, p.ID); err != nil {
		t.Fatal(err)
	}
	w, job := firstAttempt(s.Ops, p.ID)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	err = w.Work(ctx, job)
	cancel()
	var snooze *rivertype.JobSnoozeError
	if errors.As(err, &snooze) || err == nil {
		t.Fatalf("an attempt cut by its own deadline: %v, want it spent, not snoozed", err)
	}
	if !marked(s, p.ID) {
		t.Fatalf("the budget's last attempt past its own deadline: %v, and not handed to the reconciler", err)
	}
}

// acceptedPayment is a payment made under key on s without waiting, and
// accepted (202): its operation is left to its job.
func acceptedPayment(t *testing.T, s *stacktest.Stack, key string) payments.Payment {
	t.Helper()
	res := s.Pay(acme, key, pay("pm_card_visa"), "Prefer", "respond-async")
	if res.Status != http.StatusAccepted {
		t.Fatalf("pay: %d %s", res.Status, res.Body)
	}
	return paymentOf(t, res.Body)
}

// firstAttempt is a worker driving operations through ops, and the job of
// the first attempt of the payment id's operation.
func firstAttempt(ops *operation.Runner, id string) (*jobs.OperationWorker, *river.Job[jobs.OperationArgs]) {
	return &jobs.OperationWorker{Ops: ops, Backoff: jobs.Backoff{Base: time.Second, Max: time.Second}},
		&river.Job[jobs.OperationArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1},
			Args: jobs.OperationArgs{ResourceType: "payment", ID: id}}
}
