package operation_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/testwait"
)

// TestReconcilerFairOrder: more marked payments that cannot be settled than a
// batch holds must not keep a settleable one waiting.
func TestReconcilerFairOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.BatchSize = 2
	for range 3 {
		p := h.pay("pm_card_visa")
		h.proc.set(h.proc.findFails, payments.Names.DownstreamKey(p.ID), true)
		h.mark(payments.Names.Type, p.ID)
	}
	settleable := h.pay("pm_card_visa")
	h.mark(payments.Names.Type, settleable.ID)
	if r, err := h.rec.Run(t.Context()); err != nil || r.Unsettled != 2 || r.Settled != 0 {
		t.Fatalf("first run: %+v, %v", r, err)
	}
	if r, err := h.rec.Run(t.Context()); err != nil || r.Settled != 1 {
		t.Fatalf("second run: %+v, %v", r, err)
	}
	if got := h.payment(settleable.ID); got.Status != operation.StatusSucceeded {
		t.Fatalf("settleable payment %+v", got)
	}
	if n := h.count(`SELECT count(*) FROM reconciliations WHERE last_error IS NOT NULL`); n != 3 {
		t.Fatalf("unsettled with their error noted = %d, want 3", n)
	}
}

// TestReconcilerSettlesInParallel: a run settles its batch Parallel at a
// time, so that processor calls that hang (a processor dropping requests)
// hold up only their own lanes: four marked payments whose charges are held
// are all in flight at once in one run, and a fifth, behind them in the
// batch, settles meanwhile. One at a time, the first held call held the whole
// run.
func TestReconcilerSettlesInParallel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.Parallel = 5
	release := make(chan struct{})
	var held []string
	for range 4 {
		held = append(held, h.heldPayment(release).ID)
	}
	free := h.pay("pm_card_visa")
	h.mark(payments.Names.Type, free.ID)
	done := h.settleAsync(t)
	testwait.For(t, "four held charges in flight at once and the fifth payment settled", func() bool {
		return h.proc.holding.Load() == 4 && h.payment(free.ID).Status == operation.StatusSucceeded
	})
	close(release)
	if r := <-done; r.Settled != 1 || r.Unsettled != 4 {
		t.Fatalf("run: %+v; want 1 settled and the 4 held unsettled", r)
	}
	for _, id := range held {
		if !h.marked(id) || h.proc.made(payments.Names.DownstreamKey(id)) != 1 {
			t.Fatalf("held payment %s: marked %t, %d charges", id, h.marked(id), h.proc.made(payments.Names.DownstreamKey(id)))
		}
	}
}

// TestReconcilerConcurrentRuns: two runs at once settle each payment once.
func TestReconcilerConcurrentRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 20
	var ids []string
	for range n {
		p := h.pay("pm_card_visa")
		ids = append(ids, p.ID)
		h.mark(payments.Names.Type, p.ID)
	}
	reports := make([]operation.Report, 2)
	var wg sync.WaitGroup
	for i := range reports {
		wg.Go(func() {
			r, err := h.rec.Run(t.Context())
			if err != nil {
				t.Error(err)
			}
			reports[i] = r
		})
	}
	wg.Wait()
	if settled := reports[0].Settled + reports[1].Settled; settled != n {
		t.Fatalf("settled %d, want each of %d once: %+v", settled, n, reports)
	}
	for _, id := range ids {
		if got := h.payment(id); got.Status != operation.StatusSucceeded || h.proc.made(payments.Names.DownstreamKey(id)) != 1 {
			t.Fatalf("payment %+v, %d charges", got, h.proc.made(payments.Names.DownstreamKey(id)))
		}
	}
	if e := h.count(`SELECT count(*) FROM events`); e != n {
		t.Fatalf("events = %d, want %d", e, n)
	}
	if m := h.count(`SELECT count(*) FROM reconciliations`); m != 0 {
		t.Fatalf("still marked: %d", m)
	}
}

// TestLedgerComparison walks the processor's ledger page by page.
func TestLedgerComparison(t *testing.T) {
	t.Parallel()

	onHarness(t, "PagesPastOneThousand", func(t *testing.T, h *harness) {
		const n = 2100
		// n payments and their charges, recorded on both sides.
		h.exec(`INSERT INTO payments (id, tenant_id, amount, currency, payment_method, status, processor_charge_id, created_at, updated_at)
			SELECT 'pay_' || i, 'ten_acme', 100, 'USD', 'pm_card_visa', 'succeeded', 'ch_' || i, now(), now()
			FROM generate_series(1, $1) i`, n)
		old := time.Now().Add(-10 * time.Minute)
		var charges []operation.LedgerEntry
		for i := 1; i <= n; i++ {
			charges = append(charges, operation.LedgerEntry{ID: fmt.Sprintf("ch_%d", i), Reference: fmt.Sprintf("pay_%d", i),
				IdempotencyKey: fmt.Sprintf("charge_pay_%d", i), Succeeded: true, Amount: 100, CreatedAt: old})
		}
		// The newest charge is one the service knows nothing of.
		h.proc.record(&h.proc.charges, append(charges, operation.LedgerEntry{ID: "ch_stranger", Reference: "pay_stranger",
			IdempotencyKey: "charge_pay_stranger", Succeeded: true, Amount: 42, CreatedAt: old.Add(time.Second)})...)

		for run := range 2 {
			r, err := h.rec.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if want := 1 - run; r.Flagged != want {
				t.Fatalf("run %d flagged %d, want %d", run, r.Flagged, want)
			}
		}
		if c := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'unknown_charge' AND reference = 'ch_stranger'`); c != 1 {
			t.Fatalf("unknown_charge cases = %d", c)
		}
		if c := h.count(`SELECT count(*) FROM needs_review`); c != 1 {
			t.Fatalf("review cases = %d, want exactly one", c)
		}
		counts, open, err := operation.CountReviewCases(t.Context(), h.db.Pool)
		if err != nil || counts[payments.Names.Reviews().Unknown] != 1 || open[payments.Names.Reviews().Unknown] != 1 {
			t.Fatalf("counts %v, open %v, %v", counts, open, err)
		}
		h.exec(`UPDATE needs_review SET resolved_at = now()`)
		if counts, open, err = operation.CountReviewCases(t.Context(), h.db.Pool); err != nil || counts[payments.Names.Reviews().Unknown] != 1 || open[payments.Names.Reviews().Unknown] != 0 {
			t.Fatalf("after resolving: counts %v, open %v, %v", counts, open, err)
		}
	})

	onHarness(t, "RepairsAndFlags", func(t *testing.T, h *harness) {
		// A charge for a payment still processing: repaired, then settled.
		stuck := h.pay("pm_card_visa")
		key := h.answerLost(stuck.ID, false)
		// A second charge for a payment already charged: flagged.
		done := h.paid()
		h.proc.record(&h.proc.charges, operation.LedgerEntry{ID: "ch_second", Reference: done.ID,
			IdempotencyKey: "other", Succeeded: true, Amount: 1000, CreatedAt: time.Now()})
		// A refund the service has no record of: flagged.
		h.proc.record(&h.proc.refunds, operation.LedgerEntry{ID: "re_stranger", IdempotencyKey: "refund_re_stranger", Reference: "re_stranger",
			Succeeded: true, Amount: 5, CreatedAt: time.Now()})

		r, err := h.rec.Run(t.Context())
		if err != nil || r.Repaired != 1 || r.Flagged != 2 {
			t.Fatalf("report %+v, %v", r, err)
		}
		for _, kind := range []string{payments.Names.Reviews().Duplicate, refunds.Names.Reviews().Unknown} {
			if c := h.count(`SELECT count(*) FROM needs_review WHERE kind = $1`, kind); c != 1 {
				t.Fatalf("%s cases = %d", kind, c)
			}
		}
		if r, err := h.rec.Run(t.Context()); err != nil || r.Settled != 1 {
			t.Fatalf("next run %+v, %v", r, err)
		}
		if got := h.payment(stuck.ID); got.Status != operation.StatusSucceeded || h.proc.made(key) != 1 {
			t.Fatalf("repaired payment %+v", got)
		}
	})

	onHarness(t, "GraceLeavesYoungEntriesToTheWorker", func(t *testing.T, h *harness) {
		h.rec.Grace = time.Minute
		h.proc.record(&h.proc.charges, operation.LedgerEntry{ID: "ch_young", Reference: "pay_young",
			IdempotencyKey: "charge_pay_young", Succeeded: true, Amount: 42, CreatedAt: time.Now()})
		if r, err := h.rec.Run(t.Context()); err != nil || r.Flagged != 0 {
			t.Fatalf("report %+v, %v", r, err)
		}
	})
}

// liveJobs stands for the job queue's knowledge of live jobs.
type liveJobs map[int64]bool

func (l liveJobs) Live(_ context.Context, ids []int64, _ time.Time) (map[int64]bool, error) {
	live := map[int64]bool{}
	for _, id := range ids {
		live[id] = l[id]
	}
	return live, nil
}

// TestSweep: an operation, payment or refund, whose key stays quiet with no
// live job is handed to the reconciler; a young one, or one with a live job,
// is left alone.
func TestSweep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.paid()
	refund := h.refund(p, 100)
	withJob := h.pay("pm_card_visa")
	young := h.pay("pm_card_visa")
	quiet := h.pay("pm_card_visa")
	s := &operation.Sweeper{DB: h.db.Pool, Jobs: liveJobs{h.jobs.job(withJob.ID): true}, StuckAfter: time.Minute, BatchSize: 10}

	h.exec(`UPDATE idempotency_keys SET updated_at = updated_at - interval '2 minutes' WHERE resource_id = ANY($1)`,
		[]string{refund.ID, withJob.ID, quiet.ID})
	if n, err := s.Sweep(t.Context()); err != nil || n != 2 {
		t.Fatalf("swept %d, %v", n, err)
	}
	for id, want := range map[string]bool{refund.ID: true, quiet.ID: true, withJob.ID: false, young.ID: false, p.ID: false} {
		if h.marked(id) != want {
			t.Fatalf("%s marked %t, want %t", id, h.marked(id), want)
		}
	}
	if n, err := s.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
	if r, err := h.rec.Run(t.Context()); err != nil || r.Settled != 2 {
		t.Fatalf("report %+v, %v", r, err)
	}
	if got := h.refundOf(refund.ID); got.Status != operation.StatusSucceeded {
		t.Fatalf("swept refund %+v", got)
	}
}

// TestReconcilerClearsLateMarks: a mark that arrives after its operation
// finished (the sweep read the key unfinished a moment before) is cleared by
// the next run, not claimed forever. (The long chaos run found it: four such
// marks kept the run from quiescing.)
func TestReconcilerClearsLateMarks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.paid()
	h.mark(payments.Names.Type, p.ID)
	if r, err := h.rec.Settle(t.Context()); err != nil || r.Lost != 1 || r.Settled != 0 {
		t.Fatalf("run: %+v, %v", r, err)
	}
	if n := h.count(`SELECT count(*) FROM reconciliations`); n != 0 {
		t.Fatalf("marks left = %d, want 0", n)
	}
	if got := h.payment(p.ID); got.Status != operation.StatusSucceeded || len(h.proc.charges) != 1 {
		t.Fatalf("payment %+v, processor charges %d", got, len(h.proc.charges))
	}
}

// TestLedgerAmountMismatch: a processor charge or refund under the very id we
// recorded, but for another amount or currency, is not accounted for: it is
// one needs-review case of its own kind. One that matches is none.
func TestLedgerAmountMismatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		refund bool                         // the refund of a paid payment, else its charge
		change func(*operation.LedgerEntry) // alters the processor's entry for it
		kind   string                       // the one case flagged, if any
	}{
		{"Match", false, func(*operation.LedgerEntry) {}, ""},
		{"ChargeAmount", false, func(e *operation.LedgerEntry) { e.Amount++ }, payments.Names.Reviews().Mismatch},
		{"ChargeCurrency", false, func(e *operation.LedgerEntry) { e.Currency = "EUR" }, payments.Names.Reviews().Mismatch},
		{"RefundMatch", true, func(*operation.LedgerEntry) {}, ""},
		{"RefundAmount", true, func(e *operation.LedgerEntry) { e.Amount-- }, refunds.Names.Reviews().Mismatch},
		// The charge succeeded at the processor, and its payment is recorded
		// as declined (below): money moved for an operation recorded failed.
		{"ChargeRecordedFailed", false, func(*operation.LedgerEntry) {}, payments.Names.Reviews().AfterFailure},
	} {
		onHarness(t, tc.name, func(t *testing.T, h *harness) {
			p := h.paid()
			ledger, id := &h.proc.charges, *h.payment(p.ID).ProcessorChargeID
			if tc.kind == payments.Names.Reviews().AfterFailure {
				h.exec(`UPDATE payments SET status = 'failed', failure_code = 'card_declined' WHERE id = $1`, p.ID)
			}
			if tc.refund {
				r := h.refund(p, 400)
				h.run(refunds.Names.Type, r.ID)
				ledger, id = &h.proc.refunds, *h.refundOf(r.ID).ProcessorRefundID
			}
			h.proc.mu.Lock()
			for i := range *ledger {
				if (*ledger)[i].ID == id {
					tc.change(&(*ledger)[i])
				}
			}
			h.proc.mu.Unlock()

			want := 0
			if tc.kind != "" {
				want = 1
			}
			if r, err := h.rec.Run(t.Context()); err != nil || r.Flagged != want || r.Repaired != 0 {
				t.Fatalf("report %+v, %v; want %d flagged", r, err, want)
			}
			if c := h.count(`SELECT count(*) FROM needs_review`); c != want {
				t.Fatalf("review cases = %d, want %d", c, want)
			}
			if c := h.count(`SELECT count(*) FROM needs_review WHERE kind = $1 AND reference = $2`, tc.kind, id); c != want {
				t.Fatalf("%s cases for %s = %d, want %d", tc.kind, id, c, want)
			}
		})
	}
}

// TestReconcilerLease: a run holds what it claims for its lease, so that a
// run that comes meanwhile (another worker's) claims none of it and makes
// no processor call for it; once the first run has noted its tries, the
// operations still unsettled are free again at once.
func TestReconcilerLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.Lease = time.Hour
	release := make(chan struct{})
	var held []string
	for range 2 {
		held = append(held, h.heldPayment(release).ID)
	}
	first := h.settleAsync(t)
	testwait.For(t, "the first run's two calls in flight", func() bool { return h.proc.holding.Load() == 2 })

	second := h.settleAsync(t)
	select {
	case r := <-second:
		if r != (operation.Report{}) {
			t.Errorf("the second run, within the first's lease: %+v; want nothing claimed", r)
		}
	case <-time.After(10 * time.Second):
		t.Error("the second run waited on the first run's operations: it claimed them too")
	}
	close(release)
	if r := <-first; r.Unsettled != 2 {
		t.Fatalf("first run: %+v; want its 2 held unsettled", r)
	}
	if n := h.count(`SELECT count(*) FROM reconciliations WHERE claimed_until IS NULL`); n != 2 {
		t.Fatalf("%d of the 2 unsettled operations free for the next run", n)
	}
	for _, id := range held {
		if made := h.proc.made(payments.Names.DownstreamKey(id)); made != 1 {
			t.Fatalf("payment %s: %d processor calls", id, made)
		}
	}
}

// TestReconcilerLeaseOfTheDead: a claim holds only while its worker lives:
// what a worker whose presence is gone (killed) had claimed is taken by the
// next pass of another, its lease notwithstanding, and what a live worker
// claimed is not.
func TestReconcilerLeaseOfTheDead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.Lease, h.rec.Worker = time.Hour, 1
	alive, dead := h.pay("pm_card_visa"), h.pay("pm_card_visa")
	for _, p := range []struct {
		id     string
		worker int32
	}{{alive.ID, 7}, {dead.ID, 8}} {
		h.mark(payments.Names.Type, p.id)
		h.exec(`UPDATE reconciliations SET claimed_until = now() + interval '1 hour', claimed_by = $2,
			claimed_on = pg_postmaster_start_time() WHERE resource_id = $1`, p.id, p.worker)
	}
	// Worker 7 lives: its presence lock is held, on a session of its own.
	conn, err := h.db.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock($1, 7)`, database.PresenceClass); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, 7)`, database.PresenceClass) //nolint:errcheck

	if r, err := h.rec.Settle(t.Context()); err != nil || r.Settled != 1 {
		t.Fatalf("run: %+v, %v; want the dead worker's claim settled", r, err)
	}
	if got := h.payment(dead.ID); got.Status != operation.StatusSucceeded {
		t.Fatalf("the dead worker's claim: %+v", got)
	}
	if !h.marked(alive.ID) || h.proc.made(payments.Names.DownstreamKey(alive.ID)) != 0 {
		t.Fatalf("the live worker's claim was taken: marked %t, %d calls", h.marked(alive.ID), h.proc.made(payments.Names.DownstreamKey(alive.ID)))
	}
}

// TestReconcilerClaimsAfterFailover: a claim is judged by its worker's
// presence only on the server it was made on: after a failover, which cuts
// every presence, a batch claimed on the old primary holds for its lease,
// its worker perhaps alive and not back yet. And a worker whose own
// presence is not back claims as nobody's, which only the lease frees;
// with its presence held, in its name.
func TestReconcilerClaimsAfterFailover(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.Lease = time.Hour
	before := h.pay("pm_card_visa")
	h.mark(payments.Names.Type, before.ID)
	// Claimed by worker 8, whose presence nobody holds, on another server.
	h.exec(`UPDATE reconciliations SET claimed_until = now() + interval '1 hour', claimed_by = 8,
		claimed_on = pg_postmaster_start_time() - interval '1 day' WHERE resource_id = $1`, before.ID)

	// This worker's presence is not back yet: it claims as nobody's.
	h.rec.Worker = 9
	release := make(chan struct{})
	p := h.heldPayment(release)
	done := h.settleAsync(t)
	testwait.For(t, "the claim's call in flight", func() bool { return h.proc.holding.Load() == 1 })
	if by := h.count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1 AND claimed_by IS NULL AND claimed_until > now()`, p.ID); by != 1 {
		t.Errorf("a worker without its presence claimed in its own name")
	}
	close(release)
	<-done
	if h.proc.made(payments.Names.DownstreamKey(before.ID)) != 0 || !h.marked(before.ID) {
		t.Fatalf("the batch claimed on the old primary was taken: %d calls", h.proc.made(payments.Names.DownstreamKey(before.ID)))
	}

	// With its presence held, it claims in its name.
	presence, err := database.HoldPresence(t.Context(), h.db.URL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer presence.Close()
	h.rec.Worker = presence.ID
	hold := make(chan struct{})
	q := h.heldPayment(hold)
	done = h.settleAsync(t)
	testwait.For(t, "the second claim's call in flight", func() bool { return h.proc.holding.Load() == 1 })
	if by := h.count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1 AND claimed_by = $2`, q.ID, presence.ID); by != 1 {
		t.Errorf("a worker with its presence did not claim in its name")
	}
	close(hold)
	<-done
}

// TestReconcilerPassOutOfTime: a pass whose time runs out gives back what
// of its batch it never tried, not counted as tried, free for the next pass
// at once, and frees the one it was trying.
func TestReconcilerPassOutOfTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.rec.Lease, h.rec.Parallel, h.rec.BatchSize = time.Hour, 1, 3
	release := make(chan struct{})
	defer close(release)
	for range 3 {
		h.heldPayment(release)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := h.rec.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count(`SELECT count(*) FROM reconciliations WHERE claimed_until IS NULL`); n != 3 {
		t.Errorf("%d of the batch of 3 free after the pass ran out of time, want 3", n)
	}
	if n := h.count(`SELECT count(*) FROM reconciliations WHERE attempts = 0 AND tried_at IS NULL`); n != 2 {
		t.Errorf("%d of the 2 untried counted as never tried", n)
	}
}
