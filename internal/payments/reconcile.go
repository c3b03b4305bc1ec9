package payments

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Reconciler settles what the worker could not know: operations marked for
// reconciliation, and charges and refunds in the processor's ledger that our
// records do not account for. Runs may overlap (the outbox keeps them to one
// at a time, but nothing here relies on it): each claims its own batch, and
// each operation is settled by whichever runner's phase commits first.
type Reconciler struct {
	Ops    *Operations
	Logger *slog.Logger
	// Window is how far back the processor's ledger is compared.
	Window time.Duration
	// Grace is how old a ledger entry must be before it is compared, so that
	// what the worker is recording right now is left to it.
	Grace time.Duration
	// BatchSize bounds how many marked operations one run tries.
	BatchSize int
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

// claimMarked takes the batch of marked operations that were tried least
// recently (never tried first) and stamps them as tried, in one statement:
// what cannot be settled yet goes to the back, so it never blocks what can,
// and a run that overlaps this one takes a different batch.
const claimMarked = `
UPDATE reconciliations r SET tried_at = now(), attempts = r.attempts + 1
FROM (
	SELECT resource_type, resource_id FROM reconciliations
	ORDER BY tried_at NULLS FIRST, marked_at, resource_id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) batch
WHERE r.resource_type = batch.resource_type AND r.resource_id = batch.resource_id
RETURNING r.resource_type, r.resource_id`

const noteError = `UPDATE reconciliations SET last_error = $3 WHERE resource_type = $1 AND resource_id = $2`

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
	rows, err := r.Ops.DB.Query(ctx, claimMarked, r.BatchSize)
	if err != nil {
		return report, fmt.Errorf("claim marked operations: %w", err)
	}
	type marked struct{ kind, id string }
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (marked, error) {
		var m marked
		return m, row.Scan(&m.kind, &m.id)
	})
	if err != nil {
		return report, fmt.Errorf("claim marked operations: %w", err)
	}
	for _, m := range batch {
		r.settleOne(ctx, m.kind, m.id, &report)
	}
	return report, nil
}

// settleOne tries one marked operation, in a span of its own inside the
// reconciler's run, and counts what came of it in report.
func (r *Reconciler) settleOne(ctx context.Context, kind, id string, report *Report) {
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracerName).Start(ctx, "reconcile "+kind,
		trace.WithAttributes(attribute.String("payments.resource_type", kind), attribute.String("payments.resource_id", id)))
	defer span.End()
	op, err := r.Ops.operation(kind)
	won := false
	if err == nil {
		won, err = r.Ops.reconcile(ctx, op, id)
	}
	switch {
	case err != nil:
		report.Unsettled++
		span.RecordError(err)
		r.Logger.WarnContext(ctx, "not settled yet", "resource_type", kind, "id", id, "err", err)
		if _, noteErr := r.Ops.DB.Exec(ctx, noteError, kind, id, err.Error()); noteErr != nil {
			r.Logger.WarnContext(ctx, "note reconciliation error", "id", id, "err", noteErr)
		}
	case won:
		report.Settled++
		r.Logger.InfoContext(ctx, "settled by the reconciler", "resource_type", kind, "id", id)
	default:
		// Finished by another runner. Its finish cleared the mark, unless
		// the mark came later: the sweep decides on what it read a moment
		// before, and the key can finish in between. Nothing is left to
		// settle either way, so the mark goes.
		report.Lost++
		r.Logger.InfoContext(ctx, "settled by another runner first", "resource_type", kind, "id", id)
		if _, err := r.Ops.DB.Exec(ctx, unmark, kind, id); err != nil {
			r.Logger.WarnContext(ctx, "clear the mark of a finished operation", "id", id, "err", err)
		}
	}
}

// tracerName names the spans this package makes.
const tracerName = "github.com/example/payments/internal/payments"

// CompareLedger walks both sides of the processor's ledger over the window:
// it marks operations the ledger shows stuck (Repaired) and adds anything
// else unaccounted for to the needs-review queue (Flagged).
func (r *Reconciler) CompareLedger(ctx context.Context) (Report, error) {
	var report Report
	for _, l := range r.ledgers() {
		repaired, flagged, err := r.compare(ctx, l)
		report.Repaired += repaired
		report.Flagged += flagged
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

// operation returns the operation of a resource type: the one place that
// maps the resource types of keys to their operations.
func (o *Operations) operation(resourceType string) (operation, error) {
	switch resourceType {
	case PaymentResourceType:
		return chargeOp{o}, nil
	case RefundResourceType:
		return refundOp{o}, nil
	}
	return nil, fmt.Errorf("no operation drives a %q", resourceType)
}

// ledger is one side of the processor's ledger, charges or refunds, and how
// our records account for its entries.
type ledger struct {
	// name is what an entry is: "charge" or "refund".
	name string
	// resourceType is the operation an entry belongs to.
	resourceType string
	page         func(ctx context.Context, since time.Time, cursor string) ([]LedgerEntry, string, error)
	// ours is the id of the operation an entry should belong to.
	ours func(LedgerEntry) string
	// lookup reads (id, status, processor id, amount, currency) of the
	// operations with ids $1.
	lookup string
	// The kinds of discrepancy: no such operation, a second entry for one,
	// an entry for one recorded as failed, the entry recorded for one but for
	// another amount or currency.
	unknown, duplicate, afterFailure, mismatch string
}

const (
	lookupPayments = `SELECT id, status, processor_charge_id, amount, currency FROM payments WHERE id = ANY($1)`
	// lookupRefunds reads the currency of a refund's payment.
	lookupRefunds = `
SELECT r.id, r.status, r.processor_refund_id, r.amount, p.currency
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = ANY($1)`
)

// ledgers are both sides of the processor's ledger. A processor charge names
// its payment; a refund names ours only through its downstream key.
func (r *Reconciler) ledgers() []ledger {
	p := r.Ops.Processor
	return []ledger{{
		name: "charge", resourceType: PaymentResourceType, page: p.LedgerCharges,
		ours:    func(e LedgerEntry) string { return e.PaymentID },
		lookup:  lookupPayments,
		unknown: ReviewUnknownCharge, duplicate: ReviewDuplicateCharge, afterFailure: ReviewChargedAfterFailure,
		mismatch: ReviewChargeAmountMismatch,
	}, {
		name: "refund", resourceType: RefundResourceType, page: p.LedgerRefunds,
		ours:    func(e LedgerEntry) string { return strings.TrimPrefix(e.IdempotencyKey, RefundDownstreamKey("")) },
		lookup:  lookupRefunds,
		unknown: ReviewUnknownRefund, duplicate: ReviewDuplicateRefund, afterFailure: ReviewRefundedAfterFailure,
		mismatch: ReviewRefundAmountMismatch,
	}}
}

// compare walks one side of the processor's ledger over the window, page by
// page, at any volume. An entry for an operation still processing is a
// repair: the operation is marked, and a run records the entry. Anything else
// unaccounted for goes to the needs-review queue, once per entry.
func (r *Reconciler) compare(ctx context.Context, l ledger) (repaired, flagged int, err error) {
	var now time.Time
	if err := r.Ops.DB.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return 0, 0, fmt.Errorf("read the database clock: %w", err)
	}
	since, cutoff := now.Add(-r.Window), now.Add(-r.Grace)
	cursor := ""
	for {
		page, next, err := l.page(ctx, since, cursor)
		if err != nil {
			return repaired, flagged, fmt.Errorf("list processor %ss: %w", l.name, err)
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
			ids[i] = l.ours(e)
		}
		found, err := r.lookup(ctx, l.lookup, ids)
		if err != nil {
			return repaired, flagged, err
		}
		for i, e := range page[:old] {
			kind, repair := classify(e, found, ids[i], l)
			switch {
			case repair:
				if err := MarkForReconciliation(ctx, r.Ops.DB, l.resourceType, ids[i]); err != nil {
					return repaired, flagged, err
				}
				repaired++
			case kind != "":
				added, err := r.flag(ctx, kind, e, l.name)
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

// accounted is how our records stand for one ledger entry.
type accounted struct {
	status      string
	processorID *string
	amount      int64
	currency    string
}

// lookup reads the status, processor id, amount and currency of the
// operations named by ids in one query, so that a page costs one round trip
// whatever its size.
func (r *Reconciler) lookup(ctx context.Context, sql string, ids []string) (map[string]accounted, error) {
	rows, err := r.Ops.DB.Query(ctx, sql, ids)
	if err != nil {
		return nil, fmt.Errorf("look up ledger entries: %w", err)
	}
	found := map[string]accounted{}
	var (
		id string
		a  accounted
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &a.status, &a.processorID, &a.amount, &a.currency}, func() error {
		found[id] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up ledger entries: %w", err)
	}
	return found, nil
}

// classify decides what one ledger entry means, given our operation ours: a
// kind of discrepancy, a repair, or neither when it is accounted for.
func classify(e LedgerEntry, found map[string]accounted, ours string, l ledger) (kind string, repair bool) {
	a, ok := found[ours]
	switch {
	case !ok:
		return l.unknown, false
	case a.processorID != nil && *a.processorID == e.ID:
		// Ours, but it must also move what we recorded. A refund entry names
		// no currency; its amount is compared alone.
		if e.Amount != a.amount || e.Currency != "" && e.Currency != a.currency {
			return l.mismatch, false
		}
		return "", false
	case a.processorID != nil:
		return l.duplicate, false
	case a.status == StatusProcessing:
		return "", true
	}
	return l.afterFailure, false
}

// flag adds a discrepancy to the needs-review queue, once per ledger entry.
func (r *Reconciler) flag(ctx context.Context, kind string, e LedgerEntry, name string) (bool, error) {
	detail := fmt.Sprintf("processor %s %s under key %s (payment %q, amount %d %s, succeeded %t) is not accounted for",
		name, e.ID, e.IdempotencyKey, e.PaymentID, e.Amount, e.Currency, e.Succeeded)
	added, err := flagForReview(ctx, r.Ops.DB, kind, e.ID, detail)
	if err != nil || !added {
		return false, err
	}
	r.Logger.ErrorContext(ctx, "needs review", "kind", kind, "reference", e.ID, "detail", detail)
	return true, nil
}
