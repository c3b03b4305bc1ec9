package operation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/timer"
)

// Reconciler settles what the worker could not know: operations marked for
// reconciliation, and entries of the processor's ledgers, one per kind, that
// our records do not account for. Runs may overlap (every worker runs its own
// Loop): each claims its own batch, held for its Lease, and each operation is
// settled by whichever runner's phase commits first.
type Reconciler struct {
	Ops    *Runner
	Logger *slog.Logger
	// Window is how far back the processor's ledger is compared.
	Window time.Duration
	// Grace is how old a ledger entry must be before it is compared, so that
	// what the worker is recording right now is left to it.
	Grace time.Duration
	// BatchSize bounds how many marked operations one run tries.
	BatchSize int
	// Parallel is how many operations of its batch a run settles at once
	// (at least one). Each may wait on the processor up to its timeout: one
	// at a time, a batch with a few calls that hang (a processor dropping
	// requests) spent its whole pass on them, and an operation marked
	// behind a long queue waited several passes for its next try.
	Parallel int
	// Lease is how long an operation a run claims is left to that run: no
	// other run claims it until the run notes its try (an operation still
	// unsettled is free again at once), the lease ends, or the run's process
	// is known dead (Worker). It is the bound of a pass (Loop's timeout),
	// past which the run holds nothing; zero leaves overlapping runs only
	// the claim itself to keep them apart.
	Lease time.Duration
	// Worker is the database.Presence ID of the process running the passes,
	// recorded with each claim, so that what a process that died had
	// claimed is free at the next pass of any other, not when the lease
	// ends. Zero: none, and only the lease frees it.
	Worker int32
	// Tracer makes the span of each Loop pass; nil means the global one.
	Tracer trace.TracerProvider
}

// CrashReconcileClaimed is the crash point of a reconcile pass that has
// claimed its batch and settled none of it yet.
const CrashReconcileClaimed = "reconcile_claimed"

// Loop runs a pass (Pass) at once and then every interval, jittered, each
// bounded by timeout, until ctx ends. Every worker runs its own loop, not a
// job that one worker at a time may hold: a worker that dies mid-pass holds
// nothing up, and the next pass of any other worker comes within an
// interval. Passes that overlap are safe: each claims its own batch.
func (r *Reconciler) Loop(ctx context.Context, sweeper *Sweeper, interval, timeout time.Duration) {
	tracer := r.Tracer
	if tracer == nil {
		tracer = otel.GetTracerProvider()
	}
	for {
		pass, span := tracer.Tracer(tracerName).Start(ctx, "reconcile pass", trace.WithNewRoot())
		pass, cancel := context.WithTimeout(pass, timeout)
		if err := r.Pass(pass, sweeper); err != nil && ctx.Err() == nil {
			span.RecordError(err)
			r.Logger.WarnContext(pass, "reconcile pass", "err", err)
		}
		cancel()
		span.End()
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval + time.Duration(rand.Int64N(int64(interval)/5+1)) - interval/10):
		}
	}
}

// Pass hands the operations the sweeper finds stuck to the reconciler, and
// settles a batch of marked ones: logged, and counted by the Observer.
func (r *Reconciler) Pass(ctx context.Context, sweeper *Sweeper) error {
	stuck, err := sweeper.Sweep(ctx)
	if err != nil {
		return err
	}
	report, err := r.Settle(ctx)
	if stuck+report.Settled+report.Lost+report.Unsettled > 0 {
		r.Logger.InfoContext(ctx, "reconciled", "stuck", stuck, "settled", report.Settled, "lost_race", report.Lost, "unsettled", report.Unsettled)
	}
	if obs := r.Ops.Observer; obs != nil {
		obs.Reconciliation(ReconciliationScheduled, stuck)
		obs.Reconciliation(ReconciliationSettled, report.Settled)
		obs.Reconciliation(ReconciliationLost, report.Lost)
		obs.Reconciliation(ReconciliationUnsettled, report.Unsettled)
	}
	return err
}

// Report says what one run did.
type Report struct {
	// Settled operations were finished by this run.
	Settled int
	// Lost were settled meanwhile by another runner (a job retry, another run).
	Lost int
	// Unsettled could not be settled yet; they stay marked.
	Unsettled int
	// Repaired are operations the ledger showed to be stuck: marked now.
	Repaired int
	// Flagged are new cases in the needs-review queue.
	Flagged int
}

// claimMarked takes the batch of marked operations, among those no run
// holds, that were tried least recently (never tried first), stamps them as
// tried and holds them for the lease ($2) in the name of this process ($3),
// in one statement: what cannot be settled yet goes to the back, so it never
// blocks what can, and a run that overlaps this one, or comes before this
// one's lease ends, takes others. It returns each one's tried_at and
// attempts as they were, for releaseUntried. A claim of a process whose
// presence is gone ($4 its class) holds nothing: the statement learns it by
// taking that presence lock, as only a lock nobody holds can be taken; but
// only for a claim made on this server (claimed_on), since a failover cuts
// every presence and the workers take theirs back a few seconds apart, and
// the first back must not take the others' batches. A process whose own
// presence is not back yet ($5 its sessions' application_name) claims as
// nobody's, for the lease alone to free, as webhook places do.
const claimMarked = `
UPDATE reconciliations r SET tried_at = now(), attempts = r.attempts + 1,
	claimed_until = now() + $2::interval, claimed_on = pg_postmaster_start_time(),
	claimed_by = CASE WHEN holds_presence($4, $3, $5) THEN $3::integer END
FROM (
	SELECT resource_type, resource_id, tried_at, attempts FROM reconciliations
	WHERE claimed_until IS NULL OR claimed_until <= now()
		OR (claimed_by IS NOT NULL AND claimed_on = pg_postmaster_start_time() AND pg_try_advisory_xact_lock($4, claimed_by))
	ORDER BY tried_at NULLS FIRST, marked_at, resource_id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) batch
WHERE r.resource_type = batch.resource_type AND r.resource_id = batch.resource_id
RETURNING r.resource_type, r.resource_id, batch.tried_at, batch.attempts, r.claimed_until`

// releaseUntried gives back the operations of a batch that its pass ran out
// of time to try, as they were before the claim ($3 and $4: tried_at and
// attempts), while the claim is still this pass's ($5 its claimed_until):
// the next pass of any worker takes them at once, in their place in the
// order, rather than after the lease.
const releaseUntried = `
UPDATE reconciliations r SET tried_at = u.tried_at, attempts = u.attempts, claimed_until = NULL, claimed_by = NULL
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::timestamptz[])
	AS u (resource_type, resource_id, tried_at, attempts, claimed_until)
WHERE r.resource_type = u.resource_type AND r.resource_id = u.resource_id AND r.claimed_until = u.claimed_until`

// noteError notes why an operation is not settled yet, and frees it for the
// next run.
const noteError = `UPDATE reconciliations SET last_error = $3, claimed_until = NULL, claimed_by = NULL WHERE resource_type = $1 AND resource_id = $2`

// unmark clears the mark of an operation whose key is finished.
const unmark = `DELETE FROM reconciliations WHERE resource_type = $1 AND resource_id = $2`

// Run settles a batch of marked operations, then compares the ledgers.
func (r *Reconciler) Run(ctx context.Context) (Report, error) {
	report, err := r.Settle(ctx)
	if err != nil {
		return report, err
	}
	ledger, err := r.CompareLedger(ctx)
	report.Repaired, report.Flagged = ledger.Repaired, ledger.Flagged
	return report, err
}

// Settle tries a batch of marked operations. One that still cannot be
// settled stays marked for a later run, behind the others.
func (r *Reconciler) Settle(ctx context.Context) (Report, error) {
	var report Report
	rows, err := r.Ops.DB.Query(ctx, claimMarked, r.BatchSize, r.Lease, r.Worker, database.PresenceClass, database.PresenceApplication)
	if err != nil {
		return report, fmt.Errorf("claim marked operations: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (marked, error) {
		var m marked
		return m, row.Scan(&m.kind, &m.id, &m.triedAt, &m.attempts, &m.claimedUntil)
	})
	if err != nil {
		return report, fmt.Errorf("claim marked operations: %w", err)
	}
	if len(batch) > 0 {
		crash.At(CrashReconcileClaimed)
	}
	// Operations of one batch are settled as those of two overlapping runs
	// are: each by whichever runner's phase commits first.
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan marked)
	)
	for range min(max(r.Parallel, 1), len(batch)) {
		wg.Go(func() {
			for m := range next {
				result := r.settleOne(ctx, m.kind, m.id)
				mu.Lock()
				report.count(result)
				mu.Unlock()
			}
		})
	}
	var untried []marked
	for i, m := range batch {
		select {
		case next <- m:
			continue
		case <-ctx.Done():
			untried = batch[i:]
		}
		break
	}
	close(next)
	wg.Wait()
	if err := r.release(ctx, untried); err != nil {
		return report, err
	}
	return report, nil
}

// marked is an operation of a claimed batch, with what releaseUntried
// restores.
type marked struct {
	kind, id     string
	triedAt      pgtype.Timestamptz
	attempts     int32
	claimedUntil time.Time
}

// release gives back the operations of the batch that the pass, out of
// time (ctx done), never tried: not counted as tried, free for the next
// pass at once. It runs past ctx, for a moment.
func (r *Reconciler) release(ctx context.Context, untried []marked) error {
	if len(untried) == 0 {
		return nil
	}
	kinds, ids := make([]string, len(untried)), make([]string, len(untried))
	tried, attempts := make([]pgtype.Timestamptz, len(untried)), make([]int32, len(untried))
	until := make([]time.Time, len(untried))
	for i, m := range untried {
		kinds[i], ids[i], tried[i], attempts[i], until[i] = m.kind, m.id, m.triedAt, m.attempts, m.claimedUntil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := r.Ops.DB.Exec(ctx, releaseUntried, kinds, ids, tried, attempts, until); err != nil {
		return fmt.Errorf("release %d untried operations: %w", len(untried), err)
	}
	return nil
}

// releaseTimeout bounds what a pass writes once its time is up: giving
// back what it did not try, noting why one it tried is not settled.
const releaseTimeout = 5 * time.Second

// settled is what came of one try of a marked operation.
type settled int

const (
	settledNot       settled = iota // not settled yet: it stays marked
	settledHere                     // finished by this run
	settledElsewhere                // finished by another runner first
)

// count counts result in the report.
func (report *Report) count(result settled) {
	switch result {
	case settledHere:
		report.Settled++
	case settledElsewhere:
		report.Lost++
	default:
		report.Unsettled++
	}
}

// settleOne tries one marked operation, in a span of its own inside the
// reconciler's run, and says what came of it.
func (r *Reconciler) settleOne(ctx context.Context, kind, id string) settled {
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, "reconcile "+kind,
		trace.WithAttributes(attribute.String("payments.resource_type", kind), attribute.String("payments.resource_id", id)))
	defer span.End()
	k, err := r.Ops.Kinds.Kind(kind)
	won := false
	if err == nil {
		won, err = r.Ops.drive(ctx, k, id, SettledByReconciler)
	}
	switch {
	case err != nil:
		span.RecordError(err)
		r.Logger.WarnContext(ctx, "not settled yet", "resource_type", kind, "id", id, "err", err)
		// Noted even when the pass ran out of time in the middle of it,
		// so that its claim is freed now, not at the lease's end.
		note, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, noteErr := r.Ops.DB.Exec(note, noteError, kind, id, err.Error()); noteErr != nil {
			r.Logger.WarnContext(ctx, "note reconciliation error", "id", id, "err", noteErr)
		}
		return settledNot
	case won:
		r.Logger.InfoContext(ctx, "settled by the reconciler", "resource_type", kind, "id", id)
		return settledHere
	default:
		// Finished by another runner. Its finish cleared the mark, unless
		// the mark came later: the sweep decides on what it read a moment
		// before, and the key can finish in between. Nothing is left to
		// settle either way, so the mark goes.
		r.Logger.InfoContext(ctx, "settled by another runner first", "resource_type", kind, "id", id)
		if _, err := r.Ops.DB.Exec(ctx, unmark, kind, id); err != nil {
			r.Logger.WarnContext(ctx, "clear the mark of a finished operation", "id", id, "err", err)
		}
		return settledElsewhere
	}
}

// tracerName names the spans this package makes.
const tracerName = "github.com/example/payments/internal/operation"

// ErrNoLedger reports a ledger comparison asked of a processor that lists no
// ledger (Processor.Ledger): the worker does not schedule one, and says so.
var ErrNoLedger = errors.New("the processor lists no ledger: the comparison is off")

// CompareLedger walks both sides of the processor's ledger over the window:
// it marks operations the ledger shows stuck (Repaired) and adds anything
// else unaccounted for to the needs-review queue (Flagged).
func (r *Reconciler) CompareLedger(ctx context.Context) (Report, error) {
	var report Report
	if !r.Ops.Processor.Ledger {
		return report, fmt.Errorf("%w: %s", ErrNoLedger, r.Ops.Processor.Name)
	}
	for _, k := range r.Ops.Kinds.Kinds() {
		repaired, flagged, err := r.compare(ctx, k)
		report.Repaired += repaired
		report.Flagged += flagged
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

// ledgerPage is one page of k's ledger, asked again, after the wait it asks
// for, while the processor did not execute the request (ErrNotSent: no turn
// under its rate limit, which serves the ledger last), until ctx ends.
func ledgerPage(ctx context.Context, k Kind, since time.Time, cursor string) ([]LedgerEntry, string, error) {
	ctx = WithShare(ctx, ShareLedger)
	for {
		page, next, err := k.LedgerPage(ctx, since, cursor)
		wait, notSent := RetryAfter(err)
		if !notSent {
			return page, next, err
		}
		if err := timer.Sleep(ctx, max(wait, ledgerRetry)); err != nil {
			return nil, "", fmt.Errorf("%w (waiting for a turn after: %w)", err, ctx.Err())
		}
	}
}

// ledgerRetry is the least wait before a ledger page not sent is asked again.
const ledgerRetry = 100 * time.Millisecond

// compare walks one side of the processor's ledger over the window, page by
// page, at any volume. An entry for an operation still processing is a
// repair: the operation is marked, and a run records the entry. Anything else
// unaccounted for goes to the needs-review queue, once per entry.
func (r *Reconciler) compare(ctx context.Context, k Kind) (repaired, flagged int, err error) {
	n := k.Names()
	cases := n.Reviews()
	var now time.Time
	if err := r.Ops.DB.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return 0, 0, fmt.Errorf("read the database clock: %w", err)
	}
	since, cutoff := now.Add(-r.Window), now.Add(-r.Grace)
	cursor := ""
	for {
		page, next, err := ledgerPage(ctx, k, since, cursor)
		if err != nil {
			return repaired, flagged, fmt.Errorf("list processor %ss: %w", n.Object, err)
		}
		// Oldest first: past the cutoff, the rest are newer still.
		old := len(page)
		for i, e := range page {
			if e.CreatedAt.After(cutoff) {
				old = i
				break
			}
		}
		ids := make([]string, old)
		for i, e := range page[:old] {
			ids[i] = e.Reference
		}
		found, err := accounted(ctx, r.Ops.DB, n, ids)
		if err != nil {
			return repaired, flagged, fmt.Errorf("look up ledger entries: %w", err)
		}
		for i, e := range page[:old] {
			kind, repair := classify(k, e, found, ids[i], cases)
			switch {
			case repair:
				if err := MarkForReconciliation(ctx, r.Ops.DB, n.Type, ids[i]); err != nil {
					return repaired, flagged, err
				}
				repaired++
			case kind != "":
				added, err := r.flag(ctx, kind, e, n.Object)
				if err != nil {
					return repaired, flagged, err
				}
				if added {
					flagged++
				}
			}
		}
		if old < len(page) || next == "" {
			return repaired, flagged, nil
		}
		cursor = next
	}
}

// classify decides what one ledger entry means, given our operation ours of
// kind k: a kind of discrepancy, a repair, or neither when it is accounted
// for.
func classify(k Kind, e LedgerEntry, found map[string]Accounted, ours string, cases Reviews) (kind string, repair bool) {
	a, ok := found[ours]
	switch {
	case ours == "" || !ok:
		return cases.Unknown, false
	case a.ProcessorID != nil && *a.ProcessorID == e.ID:
		// Ours, but it must also move what we recorded. An entry that names
		// no currency is compared on its amount alone; one that succeeded
		// where we recorded a state that failed moved money we said it did
		// not (a status we cannot read is another's to report).
		if st, err := StateOf(k, a.Status); err == nil && e.Succeeded && !st.Succeeded {
			return cases.AfterFailure, false
		}
		if e.Amount != a.Amount || e.Currency != "" && e.Currency != a.Currency {
			return cases.Mismatch, false
		}
		return "", false
	case a.ProcessorID != nil:
		return cases.Duplicate, false
	case a.Status == StatusProcessing:
		return "", true
	}
	return cases.AfterFailure, false
}

// flag adds a discrepancy to the needs-review queue, once per ledger entry.
func (r *Reconciler) flag(ctx context.Context, kind string, e LedgerEntry, name string) (bool, error) {
	detail := fmt.Sprintf("processor %s %s under key %s (reference %q, amount %d %s, succeeded %t) is not accounted for",
		name, e.ID, e.IdempotencyKey, e.Reference, e.Amount, e.Currency, e.Succeeded)
	added, err := flagForReview(ctx, r.Ops.DB, kind, e.ID, detail)
	if err != nil || !added {
		return false, err
	}
	r.Logger.ErrorContext(ctx, "needs review", "kind", kind, "reference", e.ID, "detail", detail)
	return true, nil
}
