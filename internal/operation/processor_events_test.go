package operation_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/testwait"
)

// observer counts what the operations report, safely for concurrent use.
type observer struct {
	mu      sync.Mutex
	settled map[string]int // by path
	events  map[string]int // by result
}

func (o *observer) Settled(_, path string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settled[path]++
}

func (o *observer) ProcessorEvent(result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events[result]++
}

func (o *observer) Attempted(_, _ string)          {}
func (o *observer) Reconciliation(_ string, _ int) {}

func (o *observer) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.settled {
		n += c
	}
	return n
}

func (h *harness) observe() *observer {
	o := &observer{settled: map[string]int{}, events: map[string]int{}}
	h.ops.Observer = o
	return o
}

var eventSeq atomic.Int64

// event is a processor event about the operation under key, as the gateway
// reads one.
func event(typ, key string, out operation.Outcome, amount int64, currency string) operation.ProcessorEvent {
	id := fmt.Sprintf("evt_test_%d_%d", time.Now().UnixNano(), eventSeq.Add(1))
	return operation.ProcessorEvent{ID: id, Type: typ, DownstreamKey: key, Outcome: out, Amount: amount, Currency: currency,
		Payload: fmt.Appendf(nil, `{"id":%q,"type":%q}`, id, typ)}
}

// chargeEvent is the charge.succeeded event of the charge the fake
// processor makes for payment p.
func chargeEvent(p payments.Payment) operation.ProcessorEvent {
	return event("charge.succeeded", payments.Names.DownstreamKey(p.ID), operation.Outcome{ID: "ch_" + p.ID, Succeeded: true}, p.Amount, p.Currency)
}

// receive records ev as the API does and returns what it found.
func (h *harness) receive(ev operation.ProcessorEvent) string {
	h.t.Helper()
	result, err := h.svc.ReceiveProcessorEvent(context.Background(), ev)
	if err != nil {
		h.t.Fatal(err)
	}
	return result
}

// settleFrom processes a received event as its job does.
func (h *harness) settleFrom(ev operation.ProcessorEvent) string {
	h.t.Helper()
	result, err := h.ops.SettleFromEvent(context.Background(), ev.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return result
}

func (h *harness) settledBy(table, id string) string {
	h.t.Helper()
	var by *string
	if err := h.db.Pool.QueryRow(context.Background(), `SELECT settled_by FROM `+table+` WHERE id = $1`, id).Scan(&by); err != nil {
		h.t.Fatal(err)
	}
	if by == nil {
		return ""
	}
	return *by
}

func (h *harness) reviewed(kind, reference string) bool {
	return h.count(`SELECT count(*) FROM needs_review WHERE kind = $1 AND reference = $2`, kind, reference) == 1
}

// TestProcessorEvents covers the webhook path: receipt, and settling through
// the same conditional phase commit as the worker and the reconciler.
func TestProcessorEvents(t *testing.T) {
	t.Parallel()

	onHarness(t, "SettlesAndTheWorkerThenDoesNothing", func(t *testing.T, h *harness) {
		obs := h.observe()
		p := h.pay("pm_card_visa")
		ev := chargeEvent(p)
		if got := h.receive(ev); got != operation.EventAccepted {
			t.Fatalf("receive = %s", got)
		}
		if h.jobs.job(ev.ID) == 0 {
			t.Fatal("no job staged to settle the event")
		}
		if got := h.settleFrom(ev); got != operation.EventSettled {
			t.Fatalf("settle = %s", got)
		}
		got := h.payment(p.ID)
		if got.Status != operation.StatusSucceeded || *got.ProcessorChargeID != "ch_"+p.ID || h.point(p.ID) != "finished" ||
			h.settledBy("payments", p.ID) != operation.SettledByWebhook {
			t.Fatalf("payment %+v at %s, settled by %q", got, h.point(p.ID), h.settledBy("payments", p.ID))
		}
		if n := h.count(`SELECT count(*) FROM events WHERE resource_id = $1 AND type = 'payment.succeeded'`, p.ID); n != 1 {
			t.Fatalf("events = %d", n)
		}
		h.run(payments.Names.Type, p.ID)
		if calls := h.proc.calls.Load(); calls != 0 {
			t.Fatalf("the worker called the processor %d times for a settled payment", calls)
		}
		if obs.settled[operation.SettledByWebhook] != 1 || obs.total() != 1 || obs.events[operation.EventSettled] != 1 {
			t.Fatalf("observed %v %v", obs.settled, obs.events)
		}
		// Processing again (a job whose completion was lost) finds the result.
		if got := h.settleFrom(ev); got != operation.EventSettled || obs.total() != 1 {
			t.Fatalf("second settle = %s, settled %d", got, obs.total())
		}
	})

	onHarness(t, "DuplicateChangesNothing", func(t *testing.T, h *harness) {
		p := h.pay("pm_card_visa")
		ev := chargeEvent(p)
		h.receive(ev)
		h.settleFrom(ev)
		staged := h.jobs.next
		if got := h.receive(ev); got != operation.EventDuplicate {
			t.Fatalf("second receive = %s", got)
		}
		if h.jobs.next != staged || h.count(`SELECT count(*) FROM processor_events`) != 1 {
			t.Fatalf("a duplicate staged a job or a row")
		}
	})

	onHarness(t, "DuplicatesRacing", func(t *testing.T, h *harness) {
		for round := range 10 {
			p := h.pay("pm_card_visa")
			ev := chargeEvent(p)
			results := make([]string, 6)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range results {
				wg.Go(func() {
					<-start
					r, err := h.svc.ReceiveProcessorEvent(t.Context(), ev)
					if err != nil {
						t.Error(err)
					}
					results[i] = r
				})
			}
			close(start)
			wg.Wait()
			accepted := 0
			for _, r := range results {
				if r == operation.EventAccepted {
					accepted++
				} else if r != operation.EventDuplicate {
					t.Fatalf("round %d: result %q", round, r)
				}
			}
			if accepted != 1 || h.count(`SELECT count(*) FROM processor_events WHERE id = $1`, ev.ID) != 1 {
				t.Fatalf("round %d: %d deliveries accepted: %v", round, accepted, results)
			}
		}
		if h.jobs.next != 10+10 { // a job per payment and one per event
			t.Fatalf("jobs staged = %d, want 20", h.jobs.next)
		}
	})

	onHarness(t, "AgreesWithTheWorker", func(t *testing.T, h *harness) {
		p := h.paid()
		ev := chargeEvent(p)
		h.receive(ev)
		if got := h.settleFrom(ev); got != operation.EventAgreed {
			t.Fatalf("settle = %s", got)
		}
		if h.settledBy("payments", p.ID) != operation.SettledByWorker || h.count(`SELECT count(*) FROM needs_review`) != 0 {
			t.Fatal("an agreeing event changed something")
		}
	})

	onHarness(t, "OutcomeContradiction", func(t *testing.T, h *harness) {
		p := h.paid()
		ev := event("charge.failed", payments.Names.DownstreamKey(p.ID),
			operation.Outcome{ID: "ch_" + p.ID, FailureCode: "card_declined"}, p.Amount, p.Currency)
		h.receive(ev)
		if got := h.settleFrom(ev); got != operation.EventContradiction {
			t.Fatalf("settle = %s", got)
		}
		if !h.reviewed(operation.ReviewEventContradiction, ev.ID) {
			t.Fatal("no review case")
		}
		if got := h.payment(p.ID); got.Status != operation.StatusSucceeded {
			t.Fatalf("payment changed: %+v", got)
		}
	})

	onHarness(t, "AmountContradictionSettlesNothing", func(t *testing.T, h *harness) {
		for _, ev := range []func(p payments.Payment) operation.ProcessorEvent{
			func(p payments.Payment) operation.ProcessorEvent {
				return event("charge.succeeded", payments.Names.DownstreamKey(p.ID), operation.Outcome{ID: "ch_x", Succeeded: true}, p.Amount-1, p.Currency)
			},
			func(p payments.Payment) operation.ProcessorEvent {
				return event("charge.succeeded", payments.Names.DownstreamKey(p.ID), operation.Outcome{ID: "ch_x", Succeeded: true}, p.Amount, "EUR")
			},
		} {
			p := h.pay("pm_card_visa")
			e := ev(p)
			h.receive(e)
			if got := h.settleFrom(e); got != operation.EventContradiction {
				t.Fatalf("settle = %s", got)
			}
			if got := h.payment(p.ID); got.Status != operation.StatusProcessing || h.point(p.ID) != "started" {
				t.Fatalf("a contradicting event settled the payment: %+v", got)
			}
			if !h.reviewed(operation.ReviewEventContradiction, e.ID) {
				t.Fatal("no review case")
			}
			// The worker still settles it, with what the processor answers.
			if err := h.ops.Run(t.Context(), payments.Names.Type, p.ID, 1); err != nil || h.payment(p.ID).Status != operation.StatusSucceeded {
				t.Fatalf("worker: %v", err)
			}
		}
	})

	onHarness(t, "UnknownOperation", func(t *testing.T, h *harness) {
		for _, key := range []string{"charge_pay_000000000000000000000000", "someone_elses_key"} {
			ev := event("charge.succeeded", key, operation.Outcome{ID: "ch_1", Succeeded: true}, 100, "USD")
			if got := h.receive(ev); got != operation.EventUnknownOperation {
				t.Fatalf("%s: receive = %s", key, got)
			}
			if !h.reviewed(operation.ReviewEventUnknownOperation, ev.ID) {
				t.Fatalf("%s: no review case", key)
			}
			if got := h.receive(ev); got != operation.EventDuplicate {
				t.Fatalf("%s: second receive = %s", key, got)
			}
		}
		if h.jobs.next != 0 {
			t.Fatalf("jobs staged for unknown operations: %d", h.jobs.next)
		}
		// A status that names no state of any kind cannot be stored: the
		// event is malformed (a 400 the processor stops retrying), not a
		// failure of the service's, and nothing is recorded.
		bad := event("charge.succeeded", "someone_elses_key", operation.Outcome{ID: "ch_2", Succeeded: true, Status: "Not A State"}, 100, "USD")
		if _, err := h.svc.ReceiveProcessorEvent(t.Context(), bad); !errors.Is(err, operation.ErrEventMalformed) {
			t.Fatalf("an unknown key's event with a status no state has: %v, want ErrEventMalformed", err)
		}
		if h.reviewed(operation.ReviewEventUnknownOperation, bad.ID) {
			t.Fatal("the malformed event was recorded")
		}
	})

	onHarness(t, "RefundsInAnyOrder", func(t *testing.T, h *harness) {
		p := h.paid()
		r := h.refund(p, 400)
		// The refund's event first, then the charge's, late.
		refundEv := event("refund.succeeded", refunds.Names.DownstreamKey(r.ID), operation.Outcome{ID: "re_x", Succeeded: true}, 400, "")
		h.receive(refundEv)
		if got := h.settleFrom(refundEv); got != operation.EventSettled {
			t.Fatalf("refund event = %s", got)
		}
		chargeEv := chargeEvent(p)
		h.receive(chargeEv)
		if got := h.settleFrom(chargeEv); got != operation.EventAgreed {
			t.Fatalf("late charge event = %s", got)
		}
		if got := h.refundOf(r.ID); got.Status != operation.StatusSucceeded || h.settledBy("refunds", r.ID) != operation.SettledByWebhook {
			t.Fatalf("refund %+v", got)
		}
		if got := h.payment(p.ID); got.AmountRefunded != 400 {
			t.Fatalf("amount refunded = %d", got.AmountRefunded)
		}
		// A second event for the same refund (a processor sending two)
		// agrees and changes nothing.
		again := event("refund.succeeded", refunds.Names.DownstreamKey(r.ID), operation.Outcome{ID: "re_x", Succeeded: true}, 400, "")
		h.receive(again)
		if got := h.settleFrom(again); got != operation.EventAgreed || h.payment(p.ID).AmountRefunded != 400 {
			t.Fatalf("second refund event = %s", got)
		}
		// A refusal settles a refund as failed.
		r2 := h.refund(p, 100)
		failed := event("refund.failed", refunds.Names.DownstreamKey(r2.ID), operation.Outcome{FailureCode: "charge_not_refundable"}, 100, "")
		h.receive(failed)
		if got := h.settleFrom(failed); got != operation.EventSettled {
			t.Fatalf("refund.failed = %s", got)
		}
		if got := h.refundOf(r2.ID); got.Status != operation.StatusFailed || *got.FailureCode != "charge_not_refundable" {
			t.Fatalf("refund %+v", got)
		}
	})

	onHarness(t, "RefundFailsAfterItSucceeded", func(t *testing.T, h *harness) {
		// Stripe's refunds can fail after they succeeded: the later event
		// moves the refund to failed, and its amount is free to refund
		// again. A success after the failure moves nothing back.
		p := h.paid()
		r := h.refund(p, 400)
		key := refunds.Names.DownstreamKey(r.ID)
		succeeded := event("refund.succeeded", key, operation.Outcome{ID: "re_x", Succeeded: true}, 400, "")
		h.receive(succeeded)
		if got := h.settleFrom(succeeded); got != operation.EventSettled || h.payment(p.ID).AmountRefunded != 400 {
			t.Fatalf("refund.succeeded = %s", got)
		}
		failed := event("refund.failed", key, operation.Outcome{ID: "re_x", FailureCode: "expired_or_canceled_card"}, 400, "")
		h.receive(failed)
		if got := h.settleFrom(failed); got != operation.EventSettled {
			t.Fatalf("refund.failed after success = %s, want settled", got)
		}
		if got := h.refundOf(r.ID); got.Status != operation.StatusFailed || *got.FailureCode != "expired_or_canceled_card" {
			t.Fatalf("refund %+v", got)
		}
		if got := h.payment(p.ID); got.AmountRefunded != 0 {
			t.Fatalf("amount refunded = %d after the refund failed", got.AmountRefunded)
		}
		late := event("refund.updated", key, operation.Outcome{ID: "re_x", Succeeded: true}, 400, "")
		h.receive(late)
		if got := h.settleFrom(late); got != operation.EventContradiction || h.refundOf(r.ID).Status != operation.StatusFailed {
			t.Fatalf("a success after the failure = %s", got)
		}
	})

	onHarness(t, "AfterTheFence", func(t *testing.T, h *harness) {
		// Given up: the close found nothing made, so an event for a charge
		// under that key contradicts the processor's own fence.
		p := h.pay("pm_card_visa")
		h.overdue("payments", p.ID)
		h.proc.set(h.proc.unknown, payments.Names.DownstreamKey(p.ID), true)
		h.reconciled(payments.Names.Type, p.ID)
		if got := h.payment(p.ID); *got.FailureCode != operation.FailureProcessorError {
			t.Fatalf("not given up: %+v", got)
		}
		ev := chargeEvent(p)
		h.receive(ev)
		if got := h.settleFrom(ev); got != operation.EventContradiction {
			t.Fatalf("event after a fence that found nothing = %s", got)
		}
		// A close that reported the charge: the event agrees.
		q := h.pay("pm_card_visa")
		h.answerLost(q.ID, true)
		h.overdue("payments", q.ID)
		h.reconciled(payments.Names.Type, q.ID)
		if got := h.payment(q.ID); got.Status != operation.StatusSucceeded || h.settledBy("payments", q.ID) != operation.SettledByReconciler {
			t.Fatalf("the close did not report the charge: %+v", got)
		}
		ev = chargeEvent(q)
		h.receive(ev)
		if got := h.settleFrom(ev); got != operation.EventAgreed {
			t.Fatalf("event after a close that reported it = %s", got)
		}
	})

	onHarness(t, "InFlightWorkerEndsQuietly", func(t *testing.T, h *harness) {
		obs := h.observe()
		p := h.pay("pm_card_timeout")
		key := payments.Names.DownstreamKey(p.ID)
		release := make(chan struct{})
		h.proc.hold(key, release)
		done := make(chan error, 1)
		go func() { done <- h.ops.Run(t.Context(), payments.Names.Type, p.ID, 1) }()
		testwait.For(t, "the charge made, its answer held", func() bool { return h.proc.made(key) == 1 })
		ev := chargeEvent(p)
		h.receive(ev)
		if got := h.settleFrom(ev); got != operation.EventSettled {
			t.Fatalf("settle = %s", got)
		}
		close(release) // the worker's call ends with an unknown outcome
		if err := <-done; err != nil {
			t.Fatalf("the worker whose call was in flight failed: %v", err)
		}
		if h.marked(p.ID) || h.proc.made(key) != 1 || obs.total() != 1 {
			t.Fatalf("marked %t, %d charges, %d settles", h.marked(p.ID), h.proc.made(key), obs.total())
		}
	})
}

// TestProcessorEventRaces races the webhook path for real against the
// worker and against the reconciler's fence, committing the same outcome at
// once: exactly one records it, the other finds the key moved on.
func TestProcessorEventRaces(t *testing.T) {
	t.Parallel()
	for _, rival := range []string{operation.SettledByWorker, operation.SettledByReconciler} {
		onHarness(t, rival, func(t *testing.T, h *harness) {
			obs := h.observe()
			wins := map[string]int{}
			for round := range 20 {
				p := h.pay("pm_card_visa")
				key := payments.Names.DownstreamKey(p.ID)
				var race func() error
				if rival == operation.SettledByWorker {
					// The processor made the charge, and sent its event; the
					// worker's call answers with the same charge.
					if _, err := h.proc.Charge(t.Context(), payments.ChargeRequest{IdempotencyKey: key, PaymentID: p.ID,
						Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod}); err != nil {
						t.Fatal(err)
					}
					race = func() error { return h.ops.Run(t.Context(), payments.Names.Type, p.ID, 1) }
				} else {
					// Past the deadline, made but not found: the reconciler
					// closes the key, and the close reports the charge.
					h.answerLost(p.ID, true)
					h.overdue("payments", p.ID)
					h.mark(payments.Names.Type, p.ID)
					race = func() error { _, err := h.rec.Settle(t.Context()); return err }
				}
				ev := chargeEvent(p)
				h.receive(ev)
				start := make(chan struct{})
				var wg sync.WaitGroup
				var webhookResult string
				wg.Go(func() {
					<-start
					r, err := h.ops.SettleFromEvent(t.Context(), ev.ID)
					if err != nil {
						t.Error(err)
					}
					webhookResult = r
				})
				wg.Go(func() {
					<-start
					if err := race(); err != nil {
						t.Error(err)
					}
				})
				close(start)
				wg.Wait()

				by := h.settledBy("payments", p.ID)
				wins[by]++
				got := h.payment(p.ID)
				switch {
				case got.Status != operation.StatusSucceeded || h.point(p.ID) != "finished":
					t.Fatalf("round %d: payment %+v at %s", round, got, h.point(p.ID))
				case (by == operation.SettledByWebhook) != (webhookResult == operation.EventSettled):
					t.Fatalf("round %d: settled by %q, the event found %q", round, by, webhookResult)
				case by != operation.SettledByWebhook && webhookResult != operation.EventAgreed:
					t.Fatalf("round %d: the event found %q", round, webhookResult)
				case h.proc.made(key) != 1:
					t.Fatalf("round %d: %d charges", round, h.proc.made(key))
				case h.count(`SELECT count(*) FROM events WHERE resource_id = $1`, p.ID) != 1:
					t.Fatalf("round %d: the payment's event was staged more than once", round)
				case obs.total() != round+1:
					t.Fatalf("round %d: %d settles observed", round, obs.total())
				}
			}
			t.Logf("wins over 20 rounds: %v", wins)
			if wins[operation.SettledByWebhook]+wins[rival] != 20 {
				t.Fatalf("wins %v", wins)
			}
		})
	}
}

func TestPruneProcessorEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	old, recent, unprocessed := chargeEvent(h.pay("pm_card_visa")), chargeEvent(h.pay("pm_card_visa")), chargeEvent(h.pay("pm_card_visa"))
	for _, ev := range []operation.ProcessorEvent{old, recent, unprocessed} {
		h.receive(ev)
	}
	h.settleFrom(old)
	h.settleFrom(recent)
	h.exec(`UPDATE processor_events SET received_at = now() - interval '2 hours' WHERE id IN ($1, $2)`, old.ID, unprocessed.ID)
	n, err := h.ops.PruneProcessorEvents(t.Context(), time.Hour, 1)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if h.count(`SELECT count(*) FROM processor_events WHERE id = $1`, old.ID) != 0 ||
		h.count(`SELECT count(*) FROM processor_events WHERE id IN ($1, $2)`, recent.ID, unprocessed.ID) != 2 {
		t.Fatal("pruned the wrong events")
	}
	// A late delivery of the pruned event is processed again, and agrees.
	if got := h.receive(old); got != operation.EventAccepted {
		t.Fatalf("late delivery = %s", got)
	}
	if got := h.settleFrom(old); got != operation.EventAgreed {
		t.Fatalf("late delivery settled = %s", got)
	}
}
