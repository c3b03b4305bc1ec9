package operation_test

import (
	"context"
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
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1); err != nil {
			t.Fatal(err)
		}
		got := h.payment(p.ID)
		if got.Status != operation.StatusSucceeded || got.ProcessorChargeID == nil || h.point(p.ID) != "finished" {
			t.Fatalf("payment %+v at %s", got, h.point(p.ID))
		}
		if n := h.count(`SELECT count(*) FROM events WHERE resource_id = $1 AND type = 'payment.succeeded'`, p.ID); n != 1 {
			t.Fatalf("events = %d", n)
		}
	})

	t.Run("DeclineIsFinal", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_declined")
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1); err != nil {
			t.Fatal(err)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusFailed || *got.FailureCode != "card_declined" {
			t.Fatalf("payment %+v", got)
		}
	})

	t.Run("UnknownUntilBudgetThenReconciler", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		h.proc.set(h.proc.unknown, payments.Names.DownstreamKey(p.ID), true)
		for attempt := 1; attempt < h.ops.MaxAttempts; attempt++ {
			err := h.ops.Run(ctx, payments.Names.Type, p.ID, attempt)
			if !errors.Is(err, operation.ErrProcessorUnknown) || errors.Is(err, operation.ErrHandedToReconciler) {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			if h.marked(p.ID) {
				t.Fatalf("marked after attempt %d, within the budget", attempt)
			}
		}
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, h.ops.MaxAttempts); !errors.Is(err, operation.ErrHandedToReconciler) {
			t.Fatalf("last attempt: %v", err)
		}
		if !h.marked(p.ID) || h.point(p.ID) != "started" {
			t.Fatalf("marked %t at %s", h.marked(p.ID), h.point(p.ID))
		}
	})

	t.Run("DroppedAnswerRetriedWithTheSameKey", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		key := payments.Names.DownstreamKey(p.ID)
		h.proc.set(h.proc.dropped, key, true)
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("first attempt: %v", err)
		}
		h.proc.set(h.proc.dropped, key, false)
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 2); err != nil {
			t.Fatal(err)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.proc.made(key) != 1 {
			t.Fatalf("payment %+v, %d charges", got, h.proc.made(key))
		}
	})

	t.Run("ClosedKeyMeansGivenUp", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		// Another runner gave up and closed the key before this attempt.
		if _, _, err := h.proc.CloseCharge(ctx, payments.Names.DownstreamKey(p.ID)); err != nil {
			t.Fatal(err)
		}
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1); err != nil {
			t.Fatal(err)
		}
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
	ctx := context.Background()

	t.Run("FoundIsRecorded", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		key := payments.Names.DownstreamKey(p.ID)
		h.proc.set(h.proc.dropped, key, true)
		_ = h.ops.Run(ctx, payments.Names.Type, p.ID, 1) // charged, answer lost
		h.proc.set(h.proc.dropped, key, false)
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

	t.Run("AbsentIsMadeAgain", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || h.proc.made(payments.Names.DownstreamKey(p.ID)) != 1 {
			t.Fatalf("payment %+v", got)
		}
	})

	t.Run("PastDeadlineGivesUpThroughTheFence", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		key := payments.Names.DownstreamKey(p.ID)
		h.proc.set(h.proc.unknown, key, true)
		h.exec(`UPDATE payments SET created_at = created_at - interval '2 hours' WHERE id = $1`, p.ID)
		if r := h.reconciled(payments.Names.Type, p.ID); r.Settled != 1 {
			t.Fatalf("report %+v", r)
		}
		got := h.payment(p.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError {
			t.Fatalf("payment %+v", got)
		}
		// The key is closed: a late attempt can never charge.
		h.proc.set(h.proc.unknown, key, false)
		if _, err := h.proc.Charge(ctx, payments.ChargeRequest{IdempotencyKey: key, PaymentID: p.ID}); !errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("a charge after the give-up: %v", err)
		}
		var status int
		if err := h.db.Pool.QueryRow(ctx, `SELECT response_status FROM idempotency_keys WHERE resource_id = $1`, p.ID).Scan(&status); err != nil || status != http.StatusBadGateway {
			t.Fatalf("stored status %d, %v", status, err)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_given_up'`); n != 1 {
			t.Fatalf("review cases = %d", n)
		}
	})

	t.Run("PastDeadlineButInFlightRecordsTheCharge", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.pay("pm_card_visa")
		key := payments.Names.DownstreamKey(p.ID)
		// A charge made while the lookup could not see it yet: only the
		// close, which waits for it, can.
		h.proc.set(h.proc.dropped, key, true)
		h.proc.set(h.proc.hidden, key, true)
		_ = h.ops.Run(ctx, payments.Names.Type, p.ID, 1)
		h.exec(`UPDATE payments SET created_at = created_at - interval '2 hours' WHERE id = $1`, p.ID)
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

	t.Run("FinishedMeanwhileIsLost", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.paid()
		if r := h.reconciled(payments.Names.Type, p.ID); r.Lost != 1 || r.Settled != 0 {
			t.Fatalf("report %+v", r)
		}
	})
}

// TestRefund runs a refund through the same machine as a charge.
func TestRefund(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.paid()
		r := h.refund(p, 400)
		if err := h.ops.Run(ctx, refunds.Names.Type, r.ID, 1); err != nil {
			t.Fatal(err)
		}
		if got := h.refundOf(r.ID); got.Status != operation.StatusSucceeded || h.payment(p.ID).AmountRefunded != 400 {
			t.Fatalf("refund %+v, payment %+v", got, h.payment(p.ID))
		}
	})

	t.Run("DefiniteRefusalIsFinalAtOnce", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p := h.paid()
		r := h.refund(p, 400)
		h.proc.mu.Lock()
		h.proc.refuse[refunds.Names.DownstreamKey(r.ID)] = "resource_missing"
		h.proc.mu.Unlock()
		if err := h.ops.Run(ctx, refunds.Names.Type, r.ID, 1); err != nil {
			t.Fatal(err)
		}
		got := h.refundOf(r.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != "resource_missing" || h.point(r.ID) != "finished" {
			t.Fatalf("refund %+v at %s", got, h.point(r.ID))
		}
		// A failed refund no longer counts against what is left.
		if again := h.refund(p, 1000); again.Status != operation.StatusProcessing {
			t.Fatalf("a full refund after the failed one: %+v", again)
		}
	})

	t.Run("BudgetThenReconciledWhenBack", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p, r, key := h.unknownRefund()
		if err := h.ops.Run(ctx, refunds.Names.Type, r.ID, h.ops.MaxAttempts); !errors.Is(err, operation.ErrHandedToReconciler) {
			t.Fatalf("last attempt: %v", err)
		}
		if !h.marked(r.ID) {
			t.Fatal("the refund was not handed to the reconciler")
		}
		if report, _ := h.rec.Run(ctx); report.Unsettled != 1 {
			t.Fatalf("while down: %+v", report)
		}
		h.proc.set(h.proc.unknown, key, false)
		if report, err := h.rec.Run(ctx); err != nil || report.Settled != 1 {
			t.Fatalf("when back: %+v, %v", report, err)
		}
		if got := h.refundOf(r.ID); got.Status != operation.StatusSucceeded || h.payment(p.ID).AmountRefunded != 1000 || h.proc.made(key) != 1 {
			t.Fatalf("refund %+v", got)
		}
	})

	t.Run("PastDeadlineGivesUpThroughTheFence", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		p, r, key := h.unknownRefund()
		h.exec(`UPDATE refunds SET created_at = created_at - interval '2 hours' WHERE id = $1`, r.ID)
		if report := h.reconciled(refunds.Names.Type, r.ID); report.Settled != 1 {
			t.Fatalf("report %+v", report)
		}
		got := h.refundOf(r.ID)
		if got.Status != operation.StatusFailed || *got.FailureCode != operation.FailureProcessorError || h.payment(p.ID).AmountRefunded != 0 {
			t.Fatalf("refund %+v", got)
		}
		h.proc.set(h.proc.unknown, key, false)
		if _, err := h.proc.Refund(ctx, refunds.Request{IdempotencyKey: key}); !errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("a refund after the give-up: %v", err)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'refund_given_up' AND reference = $1`, r.ID); n != 1 {
			t.Fatalf("review cases = %d", n)
		}
	})
}
