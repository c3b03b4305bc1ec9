package testprocessor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testprocessor"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// onStack is the whole service run against a test processor of its own,
// the worker's jobs running (its reconciler is the test's to run): the
// API, the worker and every part of the machinery read the processor's
// declaration as they would a forker's.
func onStack(t *testing.T) (*stacktest.Stack, *testprocessor.Server) {
	t.Helper()
	srv := testprocessor.NewServer(t)
	s := stacktest.New(t, stacktest.Options{Processor: srv.Settings(), MaxAttempts: 2})
	s.StartWorker()
	return s, srv
}

// pay starts a payment under key and returns its id, without waiting for
// its outcome.
func pay(t *testing.T, s *stacktest.Stack, key, method string) string {
	t.Helper()
	resp := s.Pay(stacktest.Acme, key, `{"amount":1500,"currency":"EUR","payment_method":"`+method+`"}`, "Prefer", "respond-async")
	if resp.Status != http.StatusAccepted && resp.Status != http.StatusCreated {
		t.Fatalf("payment: %d %s", resp.Status, resp.Body)
	}
	return field(t, resp.Body, "id")
}

// field is a string member of a JSON object.
func field(t *testing.T, body []byte, name string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	s, _ := v[name].(string)
	return s
}

// handedToReconciler waits for the operation id to be marked, its retry
// budget spent.
func handedToReconciler(t *testing.T, s *stacktest.Stack, id string) {
	t.Helper()
	stacktest.WaitFor(t, "the operation handed to the reconciler", func() bool {
		return s.Count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1`, id) == 1
	})
}

// settledByNotification delivers the processor's notifications and waits
// for payment id to be settled by its webhook, made once.
func settledByNotification(t *testing.T, s *stacktest.Stack, srv *testprocessor.Server, id string) {
	t.Helper()
	deliver(t, s, srv)
	stacktest.WaitFor(t, "the notification settling the payment", func() bool {
		st, by := status(t, s, id)
		return st == operation.StatusSucceeded && by == operation.SettledByWebhook
	})
	if srv.Made("charge_"+id) != 1 {
		t.Fatalf("%d payments made", srv.Made("charge_"+id))
	}
	nothingUnexpected(t, srv)
}

// settle runs one reconcile run and returns what it did.
func settle(t *testing.T, s *stacktest.Stack) operation.Report {
	t.Helper()
	r, err := s.Reconciler.Settle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// status is the payment's status and the path that settled it.
func status(t *testing.T, s *stacktest.Stack, id string) (string, string) {
	t.Helper()
	var st, by string
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT status, coalesce(settled_by, '') FROM payments WHERE id = $1`, id).Scan(&st, &by); err != nil {
		t.Fatal(err)
	}
	return st, by
}

// nothingUnexpected fails t if the service asked the processor for a call
// it does not have: a lookup, a close, a ledger page.
func nothingUnexpected(t *testing.T, srv *testprocessor.Server) {
	t.Helper()
	if u := srv.Unexpected(); len(u) > 0 {
		t.Fatalf("the service asked the processor for calls it declares it does not have: %v", u)
	}
}

// deliver posts the processor's queued notifications to the API as one
// batch, and wants them taken.
func deliver(t *testing.T, s *stacktest.Stack, srv *testprocessor.Server) {
	t.Helper()
	code, body, err := testprocessor.Deliver(context.Background(), s.API.URL+"/v1/processor/webhooks", srv.Batch(nil))
	if err != nil || code != http.StatusOK || body != testprocessor.Accepted {
		t.Fatalf("delivery: %d %q %v", code, body, err)
	}
}

// TestAskedByMakingTheCallAgain: a payment whose answers were lost is asked
// about as the processor can be asked, by making the call again under its
// key: the processor answers with what it did, and nothing is made twice.
// The service never asks it for a lookup it does not have.
func TestAskedByMakingTheCallAgain(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	srv.DropAnswers(2)
	id := pay(t, s, "asked-again", "tok_visa")
	key := "charge_" + id
	handedToReconciler(t, s, id)
	if srv.Posts(key) != 2 || srv.Made(key) != 1 {
		t.Fatalf("%d requests under the key, %d payments made; want 2 and 1", srv.Posts(key), srv.Made(key))
	}
	if r := settle(t, s); r.Settled != 1 {
		t.Fatalf("reconcile: %+v", r)
	}
	if st, by := status(t, s, id); st != operation.StatusSucceeded || by != operation.SettledByReconciler {
		t.Fatalf("payment %s, settled by %s", st, by)
	}
	if srv.Posts(key) != 3 || srv.Made(key) != 1 {
		t.Fatalf("%d requests under the key, %d payments made; want 3 and 1", srv.Posts(key), srv.Made(key))
	}
	nothingUnexpected(t, srv)
}

// TestForgottenKeyWaitsForTheWebhook: past the processor's key retention, a
// call made again would be made anew, so the reconciler makes none: the
// operation waits, marked, and the processor's notification settles it.
func TestForgottenKeyWaitsForTheWebhook(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	srv.DropAnswers(2)
	id := pay(t, s, "forgotten-key", "tok_visa")
	key := "charge_" + id
	handedToReconciler(t, s, id)
	s.Exec(`UPDATE payments SET created_at = created_at - interval '7 days' WHERE id = $1`, id)
	if r := settle(t, s); r.Unsettled != 1 {
		t.Fatalf("reconcile: %+v", r)
	}
	if n := s.Count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1 AND last_error LIKE '%waiting for the processor%'`, id); n != 1 {
		t.Fatal("the operation is not marked as waiting for the processor")
	}
	if srv.Posts(key) != 2 {
		t.Fatalf("%d requests under a key the processor may have forgotten, want the 2 before", srv.Posts(key))
	}
	settledByNotification(t, s, srv, id)
}

// TestPastTheDeadlineWithoutAFence: an operation past its deadline is never
// given up for a processor with no fence, nor asked again under its key: it
// stays processing, marked, and in the needs-review queue once (the alert
// PaymentsOperationUnfenced reads it), and settles when the processor's
// notification comes.
func TestPastTheDeadlineWithoutAFence(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	srv.DropAnswers(1000)
	id := pay(t, s, "past-deadline", "tok_visa")
	key := "charge_" + id
	handedToReconciler(t, s, id)
	s.Exec(`UPDATE payments SET created_at = created_at - interval '2 hours' WHERE id = $1`, id)
	for range 2 {
		if r := settle(t, s); r.Unsettled != 1 {
			t.Fatalf("reconcile: %+v", r)
		}
	}
	if st, _ := status(t, s, id); st != operation.StatusProcessing {
		t.Fatalf("payment %s past its deadline with no fence, want processing", st)
	}
	if n := s.Count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_past_deadline' AND reference = $1`, id); n != 1 {
		t.Fatalf("%d payment_past_deadline cases, want 1", n)
	}
	if n := s.Count(`SELECT count(*) FROM needs_review WHERE kind = 'payment_given_up'`); n != 0 {
		t.Fatal("given up without a fence")
	}
	if m := s.WorkerMetrics(); !strings.Contains(m, `payments_needs_review_open{kind="payment_past_deadline"} 1`) {
		t.Fatalf("the queue's gauge does not show the case:\n%s", m)
	}
	// Past the deadline nothing is asked again under the key: the
	// processor's notification settles it.
	if srv.Posts(key) != 2 {
		t.Fatalf("%d requests under the key, want the job's two attempts only: none past the deadline", srv.Posts(key))
	}
	srv.DropAnswers(0)
	settledByNotification(t, s, srv, id)
}

// TestRefundPendingUntilItsWebhook: a refund the processor settles only by
// its webhook is pending (202, stored on the key and replayed), never an
// unknown outcome nor handed to the reconciler, and its notification moves
// it on, with the payment's refunded amount counted then.
func TestRefundPendingUntilItsWebhook(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	paid := s.Pay(stacktest.Acme, "refund-webhook", `{"amount":1500,"currency":"EUR","payment_method":"tok_visa"}`)
	if paid.Status != http.StatusCreated {
		t.Fatalf("payment: %d %s", paid.Status, paid.Body)
	}
	id := field(t, paid.Body, "id")
	refund := func() stacktest.Response {
		return s.Request(http.MethodPost, "/v1/payments/"+id+"/refunds", stacktest.Acme, `{"amount":500}`, "Idempotency-Key", "refund-webhook-1")
	}
	first := refund()
	if first.Status != http.StatusAccepted || field(t, first.Body, "status") != "pending" {
		t.Fatalf("refund: %d %s", first.Status, first.Body)
	}
	refundID := field(t, first.Body, "id")
	stacktest.WaitFor(t, "the pending refund's key finished", func() bool {
		again := refund()
		return again.Header.Get("Idempotent-Replayed") == "true" && string(again.Body) == string(first.Body) && again.Status == first.Status
	})
	if n := s.Count(`SELECT count(*) FROM reconciliations`); n != 0 {
		t.Fatal("a pending refund was handed to the reconciler")
	}
	if m := s.WorkerMetrics(); !strings.Contains(m, `payments_operation_attempts_total{resource_type="refund",result="unknown_outcome"} 0`) {
		t.Fatalf("a pending refund counted as an unknown outcome:\n%s", m)
	}
	srv.SettleRefund("refund_"+refundID, true)
	deliver(t, s, srv) // the payment's AUTHORISATION and the refund's REFUND, in one batch
	stacktest.WaitFor(t, "the refund's notification moving it on", func() bool {
		return s.Count(`SELECT count(*) FROM refunds WHERE id = $1 AND status = 'succeeded'`, refundID) == 1
	})
	if n := s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND amount_refunded = 500`, id); n != 1 {
		t.Fatal("the refund's amount is not counted on the payment")
	}
	for _, event := range []string{"refund.pending", "refund.succeeded", "payment.refunded"} {
		if n := s.Count(`SELECT count(*) FROM events WHERE type = $1`, event); n != 1 {
			t.Errorf("%d %s events, want 1", n, event)
		}
	}
	nothingUnexpected(t, srv)
}

// TestBatchesVerifiedWhole: a delivery carries several events, each signed
// by an HMAC over fields inside it; one forged item refuses the delivery
// whole, recording nothing, and a genuine one records every event once,
// answered with the processor's own text.
func TestBatchesVerifiedWhole(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	for _, key := range []string{"batch-1", "batch-2"} {
		if resp := s.Pay(stacktest.Acme, key, `{"amount":1500,"currency":"EUR","payment_method":"tok_visa"}`); resp.Status != http.StatusCreated {
			t.Fatalf("payment: %d %s", resp.Status, resp.Body)
		}
	}
	url := s.API.URL + "/v1/processor/webhooks"
	ctx := context.Background()
	forged := srv.Batch(func(it *testprocessor.Item) {
		if it.Amount.Value == 1500 && strings.HasSuffix(it.PSPReference, "2") {
			it.Amount.Value = 1 // changed after it was signed
		}
	})
	if code, body, err := testprocessor.Deliver(ctx, url, forged); err != nil || code != http.StatusBadRequest || !strings.Contains(body, "webhook_signature_invalid") {
		t.Fatalf("forged batch: %d %s %v", code, body, err)
	}
	if n := s.Count(`SELECT count(*) FROM processor_events`); n != 0 {
		t.Fatalf("a forged batch recorded %d events", n)
	}
	// The processor sends its notifications again, genuine.
	for _, key := range []string{"batch-3", "batch-4"} {
		if resp := s.Pay(stacktest.Acme, key, `{"amount":700,"currency":"EUR","payment_method":"tok_refused"}`); resp.Status != http.StatusPaymentRequired {
			t.Fatalf("refused payment: %d %s", resp.Status, resp.Body)
		}
	}
	genuine := srv.Batch(nil)
	for range 2 {
		if code, body, err := testprocessor.Deliver(ctx, url, genuine); err != nil || code != http.StatusOK || body != testprocessor.Accepted {
			t.Fatalf("genuine batch: %d %q %v", code, body, err)
		}
	}
	if n := s.Count(`SELECT count(*) FROM processor_events`); n != 2 {
		t.Fatalf("%d events recorded from a batch of 2 delivered twice, want 2", n)
	}
}

// TestNoLedger: a processor that lists no ledger has no comparison, and the
// worker says so in its metrics.
func TestNoLedger(t *testing.T) {
	t.Parallel()
	s, srv := onStack(t)
	if _, err := s.Reconciler.CompareLedger(context.Background()); !errors.Is(err, operation.ErrNoLedger) {
		t.Fatalf("compare: %v, want ErrNoLedger", err)
	}
	if m := s.WorkerMetrics(); !strings.Contains(m, "payments_ledger_comparison_enabled 0") {
		t.Fatalf("the worker's metrics do not say the comparison is off:\n%s", m)
	}
	nothingUnexpected(t, srv)
}

// TestCrashBetweenPhases: a worker that recorded the processor's answer and
// died before it finished the key leaves the key at its created point; the
// worker that takes its job over finishes it from there, and makes no call.
func TestCrashBetweenPhases(t *testing.T) {
	t.Parallel()
	srv := testprocessor.NewServer(t)
	s := stacktest.New(t, stacktest.Options{Processor: srv.Settings(), MaxAttempts: 2})
	id := pay(t, s, "crash-between", "tok_visa")
	key := "charge_" + id
	if err := s.Ops.LearnOutcome(context.Background(), "payment", id); err != nil {
		t.Fatal(err)
	}
	if p := s.RecoveryPoint(stacktest.AcmeID, "crash-between"); p != "charge_created" {
		t.Fatalf("recovery point %s, want charge_created", p)
	}
	s.StartWorker()
	stacktest.WaitFor(t, "the worker finishing the key", func() bool {
		return s.RecoveryPoint(stacktest.AcmeID, "crash-between") == "finished"
	})
	if st, _ := status(t, s, id); st != operation.StatusSucceeded || srv.Posts(key) != 1 {
		t.Fatalf("payment %s, %d requests under its key; want succeeded and 1", st, srv.Posts(key))
	}
	nothingUnexpected(t, srv)
}
