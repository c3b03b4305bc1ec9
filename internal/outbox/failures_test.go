package outbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/stacktest"
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
	if n := s.Count(`SELECT attempt FROM river_job WHERE kind = 'charge_payment'`); n < 2 {
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
	if n := s.Count(`SELECT attempt FROM river_job WHERE kind = 'charge_payment' AND state = 'completed'`); n != 1 {
		t.Fatalf("attempts = %d, want 1", n)
	}
}

// TestProcessingError: 500 without charging, every time. The retry budget
// runs out, the reconciler finds no charge and charges again until the
// deadline, then the payment fails with 502 processor_error, never charged.
func TestProcessingError(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{MaxAttempts: 2, ChargeDeadline: 10 * time.Minute})
	s.StartWorker()
	ctx := context.Background()

	res := s.Pay(acme, "proc-error", pay("pm_card_processing_error"), "Prefer", "respond-async")
	p := paymentOf(t, res.Body)
	stacktest.WaitFor(t, "the payment to be handed to the reconciler", func() bool {
		return s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND reconcile_since IS NOT NULL`, p.ID) == 1
	})
	stacktest.WaitFor(t, "the job to be cancelled", func() bool {
		return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'charge_payment' AND state = 'cancelled' AND attempt = 2`) == 1
	})

	// Before the deadline: absent, so charged again, and the outcome is still unknown.
	report, err := s.Reconciler.Run(ctx)
	if err != nil || report.Unsettled != 1 || report.Settled != 0 {
		t.Fatalf("before the deadline: %+v, %v", report, err)
	}

	s.Clock.Advance(11 * time.Minute)
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
	if n := s.Count(`SELECT count(*) FROM payments WHERE reconcile_since IS NOT NULL`); n != 0 {
		t.Errorf("still marked for reconciliation: %d", n)
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
	stacktest.WaitFor(t, "the retry budget to run out", func() bool {
		return s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND reconcile_since IS NOT NULL`, p.ID) == 1
	})
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

// TestReconciler covers each outcome of a reconciliation, with no worker:
// payments are created (202) and the test plays the part of what went wrong.
func TestReconciler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// created makes a payment whose job never runs and marks it, as the
	// worker does when its budget is spent.
	created := func(t *testing.T, s *stacktest.Stack, key, method string) payments.Payment {
		t.Helper()
		p := paymentOf(t, s.Pay(acme, key, pay(method), "Prefer", "respond-async").Body)
		if err := s.Charger.MarkForReconciliation(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("Found", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		p := created(t, s, "found", "pm_card_visa")
		// The worker's call reached the processor, and the worker died before recording it.
		charge, err := s.Gateway.Charge(ctx, payments.ChargeRequest{IdempotencyKey: payments.DownstreamKey(p.ID),
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod})
		if err != nil {
			t.Fatal(err)
		}
		if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
			t.Fatalf("report %+v, %v", report, err)
		}
		got := paymentOf(t, s.Request(http.MethodGet, "/v1/payments/"+p.ID, acme, "").Body)
		if got.Status != payments.StatusSucceeded || got.ProcessorChargeID == nil || *got.ProcessorChargeID != charge.ID {
			t.Fatalf("payment = %+v, want charge %s", got, charge.ID)
		}
		if n := s.ChargesAtProcessor(p.ID); n != 1 {
			t.Fatalf("processor charges = %d, want 1", n)
		}
		if point := s.RecoveryPoint(stacktest.AcmeID, "found"); point != "finished" {
			t.Fatalf("recovery point = %s", point)
		}
	})

	t.Run("AbsentChargesAgain", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		p := created(t, s, "absent", "pm_card_mastercard")
		if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
			t.Fatalf("report %+v, %v", report, err)
		}
		if res := s.Pay(acme, "absent", pay("pm_card_mastercard")); res.Status != http.StatusCreated {
			t.Fatalf("final = %d %s", res.Status, res.Body)
		}
		if n := s.ChargesAtProcessor(p.ID); n != 1 {
			t.Fatalf("processor charges = %d, want 1", n)
		}
	})

	t.Run("AbsentPastDeadline", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{ChargeDeadline: time.Minute})
		p := created(t, s, "late", "pm_card_visa")
		s.Clock.Advance(2 * time.Minute)
		if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
			t.Fatalf("report %+v, %v", report, err)
		}
		res := s.Pay(acme, "late", pay("pm_card_visa"))
		if res.Status != http.StatusBadGateway || paymentOf(t, res.Body).Status != payments.StatusFailed {
			t.Fatalf("final = %d %s", res.Status, res.Body)
		}
		if n := s.ChargesAtProcessor(p.ID); n != 0 {
			t.Fatalf("processor charges = %d, want 0", n)
		}
	})

	t.Run("LedgerRepairsAndReports", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		// A charge for a processing payment that nobody marked: repaired.
		p := paymentOf(t, s.Pay(acme, "unmarked", pay("pm_card_visa"), "Prefer", "respond-async").Body)
		if _, err := s.Gateway.Charge(ctx, payments.ChargeRequest{IdempotencyKey: payments.DownstreamKey(p.ID),
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod}); err != nil {
			t.Fatal(err)
		}
		// A charge for a payment the service does not have: reported.
		if _, err := s.Gateway.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "charge_pay_stranger",
			PaymentID: "pay_stranger", Amount: 42, Currency: "USD", PaymentMethod: "pm_card_visa"}); err != nil {
			t.Fatal(err)
		}
		// Charges younger than the grace period are left to the worker.
		if report, err := s.Reconciler.Run(ctx); err != nil || report.Repaired+report.Discrepancies != 0 {
			t.Fatalf("within grace: %+v, %v", report, err)
		}

		s.Clock.Advance(2 * time.Minute)
		report, err := s.Reconciler.Run(ctx)
		if err != nil || report.Repaired != 1 || report.Discrepancies != 1 {
			t.Fatalf("report %+v, %v", report, err)
		}
		if n, ok := s.Discrepancies.Load(payments.DiscrepancyUnknownCharge); !ok || n.(interface{ Load() int64 }).Load() != 1 {
			t.Fatalf("unknown_charge reported %v times", n)
		}
		// The repaired payment is settled by the next run, with the charge found.
		if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
			t.Fatalf("next run %+v, %v", report, err)
		}
		if res := s.Pay(acme, "unmarked", pay("pm_card_visa")); res.Status != http.StatusCreated {
			t.Fatalf("final = %d %s", res.Status, res.Body)
		}
		if n := s.ChargesAtProcessor(p.ID); n != 1 {
			t.Fatalf("processor charges = %d, want 1", n)
		}
	})
}

// TestSweep: a payment whose job died with its worker is found and driven on
// without any client retry; one with a live job is left alone.
func TestSweep(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	ctx := context.Background()
	p := paymentOf(t, s.Pay(acme, "stuck", pay("pm_card_visa"), "Prefer", "respond-async").Body)

	s.Clock.Advance(2 * time.Minute)
	if n, err := s.Sweeper.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("with a pending job: swept %d, %v", n, err)
	}
	// The worker took the job and was killed: River still says running.
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = $1`, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweeper.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("with a young running job: swept %d, %v", n, err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE river_job SET attempted_at = $1`, s.Clock.Now().Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweeper.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("with a dead job: swept %d, %v", n, err)
	}
	if report, err := s.Reconciler.Run(ctx); err != nil || report.Settled != 1 {
		t.Fatalf("report %+v, %v", report, err)
	}
	if point := s.RecoveryPoint(stacktest.AcmeID, "stuck"); point != "finished" {
		t.Fatalf("recovery point = %s", point)
	}
	if n := s.ChargesAtProcessor(p.ID); n != 1 {
		t.Fatalf("processor charges = %d, want 1", n)
	}
}

// TestReaper deletes only finished, expired keys, in batches; payments stay,
// and a reaped key used again is a new request.
func TestReaper(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	ctx := context.Background()

	// An unfinished key: created before any worker runs, its job cancelled.
	s.Pay(acme, "unfinished", pay("pm_card_visa"), "Prefer", "respond-async")
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()`); err != nil {
		t.Fatal(err)
	}
	s.StartWorker()
	for _, key := range []string{"k1", "k2", "k3", "k4", "k5"} {
		if res := s.Pay(acme, key, pay("pm_card_visa")); res.Status != http.StatusCreated {
			t.Fatalf("%s: %d", key, res.Status)
		}
	}

	if n, err := s.Keys.Reap(ctx, 2); err != nil || n != 0 {
		t.Fatalf("before expiry: reaped %d, %v", n, err)
	}
	s.Clock.Advance(25 * time.Hour)
	if n, err := s.Keys.Reap(ctx, 2); err != nil || n != 5 {
		t.Fatalf("after expiry: reaped %d, %v", n, err)
	}
	if n := s.Count(`SELECT count(*) FROM idempotency_keys`); n != 1 {
		t.Fatalf("keys left = %d, want the unfinished one", n)
	}
	if point := s.RecoveryPoint(stacktest.AcmeID, "unfinished"); point != "started" {
		t.Fatalf("unfinished key: %q", point)
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
	b := outbox.Backoff{Base: time.Second, Max: time.Minute}
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
