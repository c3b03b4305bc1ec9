package operation_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// TestCharge covers the worker's side of the state machine for a charge.
func TestCharge(t *testing.T) {
	t.Parallel()

	onHarness(t, "OK", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		h.run(payments.Names.Type, p.ID)
		got := h.payment(p.ID)
		if got.Status != operation.StatusSucceeded || got.ProcessorChargeID == nil || h.point(p.ID) != "finished" {
			t.Fatalf("payment %+v at %s", got, h.point(p.ID))
		}
		if n := h.count(`SELECT count(*) FROM events WHERE resource_id = $1 AND type = 'payment.succeeded'`, p.ID); n != 1 {
			t.Fatalf("events = %d", n)
		}
	})

	onHarness(t, "DeclineIsFinal", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_declined")
		h.run(payments.Names.Type, p.ID)
		if got := h.payment(p.ID); got.Status != operation.StatusFailed || *got.FailureCode != "card_declined" {
			t.Fatalf("payment %+v", got)
		}
	})

	onHarness(t, "UnknownUntilBudgetThenReconciler", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		h.proc.set(h.proc.unknown, payments.Names.DownstreamKey(p.ID), true)
		for attempt := 1; attempt < h.ops.MaxAttempts; attempt++ {
			err := h.ops.Run(t.Context(), payments.Names.Type, p.ID, attempt)
			if !errors.Is(err, operation.ErrProcessorUnknown) || errors.Is(err, operation.ErrHandedToReconciler) {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			if h.marked(p.ID) {
				t.Fatalf("marked after attempt %d, within the budget", attempt)
			}
		}
		if err := h.ops.Run(t.Context(), payments.Names.Type, p.ID, h.ops.MaxAttempts); !errors.Is(err, operation.ErrHandedToReconciler) {
			t.Fatalf("last attempt: %v", err)
		}
		if !h.marked(p.ID) || h.point(p.ID) != "started" {
			t.Fatalf("marked %t at %s", h.marked(p.ID), h.point(p.ID))
		}
	})

	onHarness(t, "DroppedAnswerRetriedWithTheSameKey", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		key := h.answerLost(p.ID, false)
		if err := h.ops.Run(t.Context(), payments.Names.Type, p.ID, 2); err != nil {
			t.Fatal(err)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.proc.made(key) != 1 {
			t.Fatalf("payment %+v, %d charges", got, h.proc.made(key))
		}
	})

	onHarness(t, "ClosedKeyMeansGivenUp", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		// Another runner gave up and closed the key before this attempt.
		if _, _, err := h.proc.CloseCharge(t.Context(), payments.ChargeRequest{IdempotencyKey: payments.Names.DownstreamKey(p.ID)}); err != nil {
			t.Fatal(err)
		}
		h.run(payments.Names.Type, p.ID)
		got := h.payment(p.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError {
			t.Fatalf("payment %+v", got)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_given_up' AND reference = $1`, p.ID); n != 1 {
			t.Fatalf("review cases = %d", n)
		}
	})
}

// TestReconcile covers each way the reconciler settles an operation.
func TestReconcile(t *testing.T) {
	t.Parallel()

	onHarness(t, "FoundIsRecorded", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		h.answerLost(p.ID, false) // charged, answer lost
		calls := h.proc.calls.Load()
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		if h.proc.calls.Load() != calls {
			t.Fatal("the reconciler charged again although the charge was found")
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.marked(p.ID) || h.point(p.ID) != "finished" {
			t.Fatalf("payment %+v, marked %t", got, h.marked(p.ID))
		}
	})

	onHarness(t, "AbsentIsMadeAgain", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.proc.made(payments.Names.DownstreamKey(p.ID)) != 1 {
			t.Fatalf("payment %+v", got)
		}
	})

	onHarness(t, "PastDeadlineGivesUpThroughTheFence", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		key := payments.Names.DownstreamKey(p.ID)
		h.proc.set(h.proc.unknown, key, true)
		h.overdue("payments", p.ID)
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		got := h.payment(p.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError {
			t.Fatalf("payment %+v", got)
		}
		// The key is closed: a late attempt can never charge.
		h.proc.set(h.proc.unknown, key, false)
		if _, err := h.proc.Charge(t.Context(), payments.ChargeRequest{IdempotencyKey: key, PaymentID: p.ID}); !errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("a charge after the give-up: %v", err)
		}
		var status int
		if err := h.db.Pool.QueryRow(t.Context(), `SELECT response_status FROM idempotency_keys WHERE resource_id = $1`, p.ID).Scan(&status); err != nil || status != http.StatusBadGateway {
			t.Fatalf("stored status %d, %v", status, err)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_given_up'`); n != 1 {
			t.Fatalf("review cases = %d", n)
		}
	})

	onHarness(t, "PastDeadlineButInFlightRecordsTheCharge", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		// A charge made while the lookup could not see it yet: only the
		// close, which waits for it, can.
		key := h.answerLost(p.ID, true)
		h.overdue("payments", p.ID)
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.proc.made(key) != 1 {
			t.Fatalf("payment %+v: gave up although the processor charged", got)
		}
		if n := h.count(`SELECT count(*) FROM needs_review`); n != 0 {
			t.Fatalf("review cases = %d", n)
		}
	})

	onHarness(t, "PastDeadlineTheJobMakesNoCall", func(t *testing.T, h *harness) {
		// An attempt left unknown, then an outage as long as the deadline:
		// the job's next attempt must not call under a key the processor
		// may have forgotten. It looks up and closes, as the reconciler does.
		p := h.pay("pm_card_visa")
		h.firstAttempt(p.ID, h.proc.unknown, operation.ErrProcessorUnknown)
		h.overdue("payments", p.ID)
		before := h.proc.calls.Load()
		if err := h.ops.Run(t.Context(), payments.Names.Type, p.ID, 2); err != nil {
			t.Fatalf("attempt past the deadline: %v", err)
		}
		if calls := h.proc.calls.Load() - before; calls != 0 {
			t.Fatalf("%d calls past the deadline, want none", calls)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError {
			t.Fatalf("payment %+v, want given up through the fence", got)
		}
	})

	onHarness(t, "SavedFailureGoesToReviewAtOnce", func(t *testing.T, h *harness) {
		// The processor saved a 5xx for the key and replays it: the first
		// attempt opens the review case and hands the payment to the
		// reconciler, its budget unspent; the lookup settles it later.
		p := h.pay("pm_card_visa")
		key := h.firstAttempt(p.ID, h.proc.saved, operation.ErrHandedToReconciler)
		if !h.marked(p.ID) {
			t.Fatal("not marked for the reconciler")
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_saved_failure' AND reference = $1`, p.ID); n != 1 {
			t.Fatalf("%d payment_saved_failure cases, want 1", n)
		}
		h.proc.set(h.proc.saved, key, false)
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
	})

	onHarness(t, "FinishedMeanwhileIsLost", func(t *testing.T, h *harness) {
		p := h.paid()
		if r := h.reconciled(payments.Names.Type, p.ID); r.Lost != 1 || r.Settled != 0 {
			t.Fatalf("report %+v", r)
		}
	})
}

// TestRefund runs a refund through the same machine as a charge.
func TestRefund(t *testing.T) {
	t.Parallel()

	onHarness(t, "OK", func(t *testing.T, h *harness) {
		p := h.paid()
		r := h.refund(p, 400)
		h.run(refunds.Names.Type, r.ID)
		if got := h.refundOf(r.ID); got.Status != operation.StatusSucceeded || h.payment(p.ID).AmountRefunded != 400 {
			t.Fatalf("refund %+v, payment %+v", got, h.payment(p.ID))
		}
	})

	onHarness(t, "DefiniteRefusalIsFinalAtOnce", func(t *testing.T, h *harness) {
		p := h.paid()
		r := h.refund(p, 400)
		h.proc.mu.Lock()
		h.proc.refuse[refunds.Names.DownstreamKey(r.ID)] = "resource_missing"
		h.proc.mu.Unlock()
		h.run(refunds.Names.Type, r.ID)
		got := h.refundOf(r.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != "resource_missing" || h.point(r.ID) != "finished" {
			t.Fatalf("refund %+v at %s", got, h.point(r.ID))
		}
		// A failed refund no longer counts against what is left.
		if again := h.refund(p, 1000); again.Status != operation.StatusProcessing {
			t.Fatalf("a full refund after the failed one: %+v", again)
		}
	})

	onHarness(t, "BudgetThenReconciledWhenBack", func(t *testing.T, h *harness) {
		p, r, key := h.unknownRefund()
		if err := h.ops.Run(t.Context(), refunds.Names.Type, r.ID, h.ops.MaxAttempts); !errors.Is(err, operation.ErrHandedToReconciler) {
			t.Fatalf("last attempt: %v", err)
		}
		if !h.marked(r.ID) {
			t.Fatal("the refund was not handed to the reconciler")
		}
		if report, _ := h.rec.Run(t.Context()); report.Unsettled != 1 {
			t.Fatalf("while down: %+v", report)
		}
		h.proc.set(h.proc.unknown, key, false)
		if report, err := h.rec.Run(t.Context()); err != nil || report.Settled != 1 {
			t.Fatalf("when back: %+v, %v", report, err)
		}
		if got := h.refundOf(r.ID); got.Status != operation.StatusSucceeded || h.payment(p.ID).AmountRefunded != 1000 || h.proc.made(key) != 1 {
			t.Fatalf("refund %+v", got)
		}
	})

	onHarness(t, "PastDeadlineGivesUpThroughTheFence", func(t *testing.T, h *harness) {
		p, r, key := h.unknownRefund()
		h.overdue("refunds", r.ID)
		if report := h.reconciled(refunds.Names.Type, r.ID); report.Settled != 1 {
			t.Fatalf("report %+v", report)
		}
		got := h.refundOf(r.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError || h.payment(p.ID).AmountRefunded != 0 {
			t.Fatalf("refund %+v", got)
		}
		h.proc.set(h.proc.unknown, key, false)
		if _, err := h.proc.Refund(t.Context(), refunds.Request{IdempotencyKey: key}); !errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("a refund after the give-up: %v", err)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'refund_given_up' AND reference = $1`, r.ID); n != 1 {
			t.Fatalf("review cases = %d", n)
		}
	})
}
