package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/stacktest"
)

const (
	acme = stacktest.Acme
	body = `{"amount": 1000, "currency": "USD", "payment_method": "%s"}`
)

func pay(method string) string { return strings.Replace(body, "%s", method, 1) }

// TestTimeoutToken: the processor charges, then answers only after the
// gateway gave up. The retry, with the same downstream key, gets the charge.
func TestTimeoutToken(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{ProcessorTimeout: 300 * time.Millisecond})
	s.StartWorker()
	res := s.Pay(acme, "timeout", pay("pm_card_timeout"), "Prefer", "wait=15")
	if res.Status != http.StatusCreated {
		t.Fatalf("status = %d %s", res.Status, res.Body)
	}
	p := paymentOf(t, res.Body)
	if n := s.ChargesAtProcessor(p.ID); n != 1 {
		t.Fatalf("processor charges = %d, want 1", n)
	}
	if n := s.Count(`SELECT attempt FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment'`); n < 2 {
		t.Errorf("job attempts = %d: the first call should have timed out", n)
	}
}

// TestDefiniteOutcomesAreNotRetried: a decline is recorded on the first attempt.
func TestDefiniteOutcomesAreNotRetried(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	if res := s.Pay(acme, "declined", pay("pm_card_declined")); res.Status != http.StatusPaymentRequired {
		t.Fatalf("status = %d %s", res.Status, res.Body)
	}
	// River completes the job once its work returns, a moment after the key
	// finished.
	stacktest.WaitFor(t, "the job to be completed", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND state = 'completed'`) == 1
	})
	if n := s.Count(`SELECT attempt FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND state = 'completed'`); n != 1 {
		t.Fatalf("attempts = %d, want 1", n)
	}
}

// marked reports whether the operation id waits for the reconciler.
func marked(s *stacktest.Stack, id string) bool {
	return s.Count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1`, id) == 1
}

// TestProcessingError: 500 without charging, every time. The retry budget
// runs out, the reconciler finds no charge and charges again until the
// deadline, then gives up through the fence: the payment fails with 502
// processor_error, never charged, and its key is closed at the processor.
func TestProcessingError(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 2, Deadline: 10 * time.Minute})
	s.StartWorker()
	ctx := context.Background()
	res := s.Pay(acme, "proc-error", pay("pm_card_processing_error"), "Prefer", "respond-async")
	p := paymentOf(t, res.Body)
	stacktest.WaitFor(t, "the payment to be handed to the reconciler", func() bool { return marked(s, p.ID) })
	stacktest.WaitFor(t, "the job to be cancelled", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND state = 'cancelled' AND attempt = 2`) == 1
	})
	// Before the deadline: absent, so charged again, and the outcome is still unknown.
	report, err := s.Reconciler.Run(ctx)
	if err != nil || report.Unsettled != 1 || report.Settled != 0 {
		t.Fatalf("before the deadline: %+v, %v", report, err)
	}
	s.Exec(`UPDATE payments SET created_at = created_at - interval '11 minutes' WHERE id = $1`, p.ID)
	report, err = s.Reconciler.Run(ctx)
	if err != nil || report.Settled != 1 {
		t.Fatalf("past the deadline: %+v, %v", report, err)
	}
	final := s.Pay(acme, "proc-error", pay("pm_card_processing_error"))
	if final.Status != http.StatusBadGateway || !strings.Contains(string(final.Body), `"code":"processor_error"`) {
		t.Fatalf("final = %d %s", final.Status, final.Body)
	}
	if replay := s.Pay(acme, "proc-error", pay("pm_card_processing_error")); string(replay.Body) != string(final.Body) {
		t.Fatalf("replay differs: %s", replay.Body)
	}
	if n := s.ChargesAtProcessor(p.ID); n != 0 {
		t.Fatalf("processor charges = %d, want 0", n)
	}
	if marked(s, p.ID) {
		t.Error("still marked for reconciliation")
	}
	// The fence holds: no charge can ever be made with the payment's key.
	_, err = s.Gateway.Charge(ctx, payments.ChargeRequest{IdempotencyKey: payments.Names.DownstreamKey(p.ID), PaymentID: p.ID,
		Amount: p.Amount, Currency: p.Currency, PaymentMethod: "pm_card_visa"})
	if !errors.Is(err, operation.ErrKeyClosed) {
		t.Fatalf("a charge after the give-up: %v", err)
	}
	if n := s.Count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_given_up' AND reference = $1`, p.ID); n != 1 {
		t.Fatalf("review cases = %d", n)
	}
}

// TestProcessorOutage: the processor is unreachable for the whole retry
// budget; the payment waits in reconciliation and succeeds once it is back.
func TestProcessorOutage(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 3})
	s.ProcessorDown(true)
	s.StartWorker()
	ctx := context.Background()
	p := paymentOf(t, s.Pay(acme, "outage", pay("pm_card_visa"), "Prefer", "respond-async").Body)
	stacktest.WaitFor(t, "the retry budget to run out", func() bool { return marked(s, p.ID) })
	if report, err := s.Reconciler.Run(ctx); err == nil || report.Unsettled != 1 {
		t.Fatalf("during the outage: %+v, %v (want unsettled and a ledger error)", report, err)
	}
	if point := s.RecoveryPoint(stacktest.AcmeID, "outage"); point != "started" {
		t.Fatalf("recovery point = %s", point)
	}
	s.ProcessorDown(false)
	if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
		t.Fatalf("after the outage: %+v, %v", report, err)
	}
	final := s.Pay(acme, "outage", pay("pm_card_visa"))
	if final.Status != http.StatusCreated || final.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("final = %d %s", final.Status, final.Body)
	}
	if n := s.ChargesAtProcessor(p.ID); n != 1 {
		t.Fatalf("processor charges = %d, want 1", n)
	}
}

// TestRateLimitedSpendsNoAttempt: a processor that answers most calls 429
// (two a second, eight payments at once) executed nothing, and each call is
// made again under the same key after the Retry-After, without spending the
// retry budget: with a budget of one attempt, every payment succeeds by its
// worker, charged once, none handed to the reconciler.
func TestRateLimitedSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 1, Chaos: fakeprocessor.Chaos{RateLimit: 2}})
	s.StartWorker()
	const n = 8
	ids := make([]string, n)
	for i := range n {
		ids[i] = paymentOf(t, s.Pay(acme, fmt.Sprintf("limited-%d", i), pay("pm_card_visa"), "Prefer", "respond-async").Body).ID
	}
	stacktest.WaitFor(t, "every payment to settle", func() bool {
		return s.Count(`SELECT count(*) FROM payments WHERE status <> 'processing'`) == n
	})
	for i, id := range ids {
		if res := s.Pay(acme, fmt.Sprintf("limited-%d", i), pay("pm_card_visa")); res.Status != http.StatusCreated {
			t.Errorf("payment %s: %d %s", id, res.Status, res.Body)
		}
		// Its ledger, read directly: the processor limits its lookups too.
		if c := s.Count(`SELECT count(*) FROM processor.charges WHERE payment_id = $1`, id); c != 1 {
			t.Errorf("payment %s charged %d times", id, c)
		}
		if marked(s, id) {
			t.Errorf("payment %s handed to the reconciler", id)
		}
	}
	if snoozes := s.Count(`SELECT coalesce(sum((metadata->>'snoozes')::int), 0) FROM river_job
		WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment'`); snoozes < n-2 {
		t.Errorf("%d snoozes: the processor's 429s never came", snoozes)
	}
}

// inFlight waits until an operation holds its transaction open inside the
// processor: its key is reserved there and its outcome not yet committed.
func inFlight(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	stacktest.WaitFor(t, "an operation in flight inside the processor", func() bool {
		return s.Count(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle in transaction'`) > 0
	})
}

// TestGiveUpWhileInFlight: the worker's call timed out while the processor is
// still executing it, and the reconciler, past the deadline, gives up. The
// close waits for the operation in flight and reports it: the operation ends
// with its true outcome, never failed with the money moved.
func TestGiveUpWhileInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := stacktest.Options{ProcessorTimeout: 300 * time.Millisecond, Chaos: fakeprocessor.Chaos{ExecLatency: 3 * time.Second}}
	// patient is the stack's reconciler with a caller that waits out the
	// processor's latency, as the close must wait for what is in flight.
	patient := func(s *stacktest.Stack) (*operation.Runner, *operation.Reconciler) {
		ops := *s.Ops
		ops.Kinds = catalog.Kinds(fake.New(s.Processor.URL, 10*time.Second))
		rec := *s.Reconciler
		rec.Ops = &ops
		return &ops, &rec
	}

	t.Run("Charge", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, opts)
		p := paymentOf(t, s.Pay(acme, "in-flight", pay("pm_card_visa"), "Prefer", "respond-async").Body)
		if err := s.Ops.LearnOutcome(ctx, payments.Names.Type, p.ID); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("the worker's attempt: %v, want a timeout", err)
		}
		inFlight(t, s)
		s.Exec(`UPDATE payments SET created_at = created_at - interval '2 hours' WHERE id = $1`, p.ID)
		if err := operation.MarkForReconciliation(ctx, s.DB.Pool, payments.Names.Type, p.ID); err != nil {
			t.Fatal(err)
		}
		_, rec := patient(s)
		if r, err := rec.Run(ctx); err != nil || r.Settled != 1 {
			t.Fatalf("report %+v, %v", r, err)
		}
		final := s.Pay(acme, "in-flight", pay("pm_card_visa"))
		got := paymentOf(t, final.Body)
		if final.Status != http.StatusCreated || got.Status != operation.StatusSucceeded || got.ProcessorChargeID == nil {
			t.Fatalf("final = %d %s: the reconciler gave up on a charge that went through", final.Status, final.Body)
		}
		if n := s.ChargesAtProcessor(p.ID); n != 1 {
			t.Fatalf("processor charges = %d, want 1", n)
		}
		if n := s.Count(`SELECT count(*) FROM needs_review`); n != 0 {
			t.Fatalf("review cases = %d", n)
		}
	})

	t.Run("Refund", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, opts)
		p := paymentOf(t, s.Pay(acme, "paid", pay("pm_card_visa"), "Prefer", "respond-async").Body)
		ops, rec := patient(s)
		if err := ops.Run(ctx, payments.Names.Type, p.ID, 1); err != nil {
			t.Fatal(err)
		}
		res := s.Request(http.MethodPost, "/v1/payments/"+p.ID+"/refunds", acme, `{"amount": 600}`,
			"Idempotency-Key", "refund-in-flight", "Prefer", "respond-async")
		if res.Status != http.StatusAccepted {
			t.Fatalf("refund: %d %s", res.Status, res.Body)
		}
		refundID := s.KeyResource(stacktest.AcmeID, "refund-in-flight")
		if err := s.Ops.LearnOutcome(ctx, refunds.Names.Type, refundID); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("the worker's attempt: %v, want a timeout", err)
		}
		inFlight(t, s)
		s.Exec(`UPDATE refunds SET created_at = created_at - interval '2 hours' WHERE id = $1`, refundID)
		if err := operation.MarkForReconciliation(ctx, s.DB.Pool, refunds.Names.Type, refundID); err != nil {
			t.Fatal(err)
		}
		if r, err := rec.Run(ctx); err != nil || r.Settled != 1 {
			t.Fatalf("report %+v, %v", r, err)
		}
		if n := s.Count(`SELECT count(*) FROM refunds WHERE id = $1 AND status = 'succeeded'`, refundID); n != 1 {
			t.Fatal("the reconciler gave up on a refund that went through")
		}
		if n := s.Count(`SELECT amount_refunded FROM payments WHERE id = $1`, p.ID); n != 600 {
			t.Fatalf("amount_refunded = %d, want 600", n)
		}
		list, err := s.Gateway.RefundsByIdempotencyKey(ctx, refunds.Names.DownstreamKey(refundID))
		if err != nil || len(list) != 1 {
			t.Fatalf("processor refunds = %v, %v", list, err)
		}
	})
}

// TestRefundOutage: the processor is down for a refund's whole retry budget;
// the refund is handed to the reconciler, never discarded, and settles once
// the processor is back.
func TestRefundOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 2})
	s.StartWorker()
	p := paymentOf(t, s.Pay(acme, "paid", pay("pm_card_visa")).Body)
	s.ProcessorDown(true)
	refund := func() stacktest.Response {
		return s.Request(http.MethodPost, "/v1/payments/"+p.ID+"/refunds", acme, "", "Idempotency-Key", "refund-outage", "Prefer", "respond-async")
	}
	if res := refund(); res.Status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", res.Status, res.Body)
	}
	refundID := s.KeyResource(stacktest.AcmeID, "refund-outage")
	stacktest.WaitFor(t, "the refund to be handed to the reconciler", func() bool { return marked(s, refundID) })
	stacktest.WaitFor(t, "the refund job to be cancelled", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'refund' AND state = 'cancelled'`) == 1
	})
	if r, _ := s.Reconciler.Run(ctx); r.Unsettled != 1 {
		t.Fatalf("during the outage: %+v", r)
	}
	s.ProcessorDown(false)
	if r, err := s.Reconciler.Run(ctx); err != nil || r.Settled != 1 {
		t.Fatalf("after the outage: %+v, %v", r, err)
	}
	final := refund()
	if final.Status != http.StatusCreated || final.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("final = %d %s", final.Status, final.Body)
	}
	if n := s.Count(`SELECT amount_refunded FROM payments WHERE id = $1`, p.ID); n != 1000 {
		t.Fatalf("amount_refunded = %d", n)
	}
}

// TestRefundRefusedDefinitely: a refund the processor refuses for good (here,
// a charge it does not know) is final on the first attempt, stored and
// replayed, and no longer counts against what is left to refund.
func TestRefundRefusedDefinitely(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	p := paymentOf(t, s.Pay(acme, "paid", pay("pm_card_visa")).Body)
	s.Exec(`UPDATE payments SET processor_charge_id = 'ch_unknown' WHERE id = $1`, p.ID)
	refund := func() stacktest.Response {
		return s.Request(http.MethodPost, "/v1/payments/"+p.ID+"/refunds", acme, `{"amount": 300}`, "Idempotency-Key", "refused")
	}
	first := refund()
	if first.Status != http.StatusPaymentRequired || !strings.Contains(string(first.Body), `"code":"resource_missing"`) {
		t.Fatalf("refund: %d %s", first.Status, first.Body)
	}
	// River completes the job once its work returns, a moment after the key
	// finished.
	stacktest.WaitFor(t, "the job to be completed", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'refund' AND state = 'completed'`) == 1
	})
	if n := s.Count(`SELECT attempt FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'refund' AND state = 'completed'`); n != 1 {
		t.Fatalf("attempts = %d, want 1", n)
	}
	if replay := refund(); replay.Status != first.Status || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %d %s", replay.Status, replay.Body)
	}
	if n := s.Count(`SELECT coalesce(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'failed'`, p.ID); n != 0 {
		t.Fatalf("held by refunds = %d", n)
	}
}

// TestPeriodicJobs: a periodic job (the ledger comparison) runs one at a
// time across workers, and a run that fails is not retried on top of the
// next one.
func TestPeriodicJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t, stacktest.Options{})
	inserter := newInserter(t, s.DB.Pool)
	for _, args := range []river.JobArgs{jobs.LedgerArgs{}} {
		first, err := inserter.Insert(ctx, args, nil)
		if err != nil || first.UniqueSkippedAsDuplicate {
			t.Fatalf("%s: first insert: %+v, %v", args.Kind(), first, err)
		}
		second, err := inserter.Insert(ctx, args, nil)
		if err != nil || !second.UniqueSkippedAsDuplicate {
			t.Fatalf("%s: second insert while one waits: %+v, %v", args.Kind(), second, err)
		}
	}

	// With the processor down the comparison fails: it is discarded, not retried.
	s.ProcessorDown(true)
	s.StartWorker()
	stacktest.WaitFor(t, "the failed comparison to be discarded", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'compare_ledger' AND state = 'discarded' AND attempt = 1`) == 1
	})
	third, err := inserter.Insert(ctx, jobs.LedgerArgs{}, nil)
	if err != nil || third.UniqueSkippedAsDuplicate {
		t.Fatalf("next comparison after the failed one: %+v, %v", third, err)
	}
}

// TestLiveJobs: the sweep's view of River, asked through River's API. A
// waiting job is live, and so is a running one until it has run for longer
// than the worker's RescueAfter: then its worker died, and River's rescuer
// would run it again only at its next pass (every 30 s), so the sweep hands
// its operation to the reconciler at once. So it does for a retry due that
// long ago, which no leader has made available, and for a job that will
// never run again (here cancelled by hand).
func TestLiveJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t, stacktest.Options{})
	keys := []string{"dead-worker", "no-leader", "cancelled"}
	var ids []string
	for _, key := range keys {
		ids = append(ids, paymentOf(t, s.Pay(acme, key, pay("pm_card_visa"), "Prefer", "respond-async").Body).ID)
	}
	s.Relayed()
	s.Exec(`UPDATE idempotency_keys SET updated_at = updated_at - interval '10 minutes'`)
	job := func(key, set string) {
		t.Helper()
		s.Exec(`UPDATE river_job SET ` + set + ` WHERE id = (SELECT job_id FROM idempotency_keys WHERE key = '` + key + `')`)
	}
	sweep := func(want int) {
		t.Helper()
		if n, err := s.Sweeper.Sweep(ctx); err != nil || n != want {
			t.Fatalf("swept %d, %v; want %d", n, err, want)
		}
	}
	sweep(0)
	// Taken by a worker a moment ago: running, and live.
	job("dead-worker", `state = 'running', attempt = 1, attempted_at = now() - interval '1 second'`)
	job("no-leader", `state = 'retryable', attempt = 1, scheduled_at = now() - interval '1 second'`)
	sweep(0)
	// Taken long ago by a worker that died; due long ago, and never made
	// available; cancelled.
	job("dead-worker", `attempted_at = now() - interval '1 hour'`)
	job("no-leader", `scheduled_at = now() - interval '1 hour'`)
	job("cancelled", `state = 'cancelled', finalized_at = now()`)
	sweep(3)
	if r, err := s.Reconciler.Run(ctx); err != nil || r.Settled != 3 {
		t.Fatalf("report %+v, %v", r, err)
	}
	for _, id := range ids {
		if n := s.ChargesAtProcessor(id); n != 1 {
			t.Fatalf("processor charges for %s = %d, want 1", id, n)
		}
	}
}

// TestReaper turns only finished, expired keys into tombstones, in batches,
// then deletes tombstones past theirs; payments stay, and a key used again
// answers 410 until its tombstone is gone, then is a new request.
func TestReaper(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	ctx := context.Background()
	// An unfinished key: created before any worker runs, its job cancelled.
	s.Pay(acme, "unfinished", pay("pm_card_visa"), "Prefer", "respond-async")
	s.Relayed()
	s.Exec(`UPDATE river_job SET state = 'cancelled', finalized_at = now()`)
	s.StartWorker()
	for _, key := range []string{"k1", "k2", "k3", "k4", "k5"} {
		if res := s.Pay(acme, key, pay("pm_card_visa")); res.Status != http.StatusCreated {
			t.Fatalf("%s: %d", key, res.Status)
		}
	}
	if expired, deleted, err := s.Keys.Reap(ctx, idempotency.ReapPace{Batch: 2}); err != nil || expired+deleted != 0 {
		t.Fatalf("before expiry: %d, %d, %v", expired, deleted, err)
	}
	s.Exec(`UPDATE idempotency_keys SET expires_at = expires_at - interval '25 hours' WHERE expires_at IS NOT NULL`)
	if expired, deleted, err := s.Keys.Reap(ctx, idempotency.ReapPace{Batch: 2}); err != nil || expired != 5 || deleted != 0 {
		t.Fatalf("after expiry: %d expired, %d deleted, %v", expired, deleted, err)
	}
	if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE recovery_point = 'expired' AND response_body IS NULL`); n != 5 {
		t.Fatalf("tombstones = %d, want 5", n)
	}
	if point := s.RecoveryPoint(stacktest.AcmeID, "unfinished"); point != "started" {
		t.Fatalf("unfinished key: %q", point)
	}
	if res := s.Pay(acme, "k1", pay("pm_card_visa")); res.Status != http.StatusGone {
		t.Fatalf("retry under a tombstone: %d %s", res.Status, res.Body)
	}
	s.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE recovery_point = 'expired'`)
	if expired, deleted, err := s.Keys.Reap(ctx, idempotency.ReapPace{Batch: 2}); err != nil || expired != 0 || deleted != 5 {
		t.Fatalf("tombstones past theirs: %d expired, %d deleted, %v", expired, deleted, err)
	}
	if n := s.Count(`SELECT count(*) FROM payments`); n != 6 {
		t.Fatalf("payments = %d, want 6", n)
	}
	// The reaped key is free: the same request again is a new payment.
	res := s.Pay(acme, "k1", pay("pm_card_visa"))
	if res.Status != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("reused key: %d %v", res.Status, res.Header)
	}
	if n := s.Count(`SELECT count(*) FROM payments`); n != 7 {
		t.Fatalf("payments = %d, want 7", n)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := jobs.Backoff{Base: time.Second, Max: time.Minute}
	for attempt, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute} {
		for range 50 {
			if d := b.Delay(attempt); d < ceiling/2 || d > ceiling {
				t.Fatalf("Delay(%d) = %s, want within [%s, %s]", attempt, d, ceiling/2, ceiling)
			}
		}
	}
	if got, want := b.Horizon(3, 10*time.Second), 30*time.Second+time.Second+2*time.Second; got != want {
		t.Fatalf("Horizon = %s, want %s", got, want)
	}
}
