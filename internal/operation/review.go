package operation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// Kinds of case in the needs-review queue that are not a kind's own. Each
// kind has its own too, derived from its names (see Names.Reviews): its give-up
// and the discrepancies between the processor's ledger and ours.
const (
	// ReviewEventContradiction is a processor event that contradicts the
	// operation it names: another outcome than the one recorded, or another
	// amount or currency than the operation's. Its reference is the event.
	ReviewEventContradiction = "processor_event_contradiction"
	// ReviewEventUnknownOperation is a processor event naming no operation
	// of this service.
	ReviewEventUnknownOperation = "processor_event_unknown_operation"
)

// Reviews are a kind's cases, derived from its names: for a payment (whose
// processor object is a charge), payment_given_up, unknown_charge,
// duplicate_charge, charged_after_failure, charge_amount_mismatch and
// payment_past_deadline.
type Reviews struct {
	// GivenUp is an operation given up on: failed with processor_error once
	// the processor confirmed, through the fence, that nothing was made.
	GivenUp string
	// Unknown is a processor object for an operation we do not have.
	Unknown string
	// Duplicate is a second processor object for one operation.
	Duplicate string
	// AfterFailure is a processor object for an operation recorded as
	// failed without it.
	AfterFailure string
	// Mismatch is the processor object recorded for an operation, for
	// another amount or currency than the operation's.
	Mismatch string
	// Unfenced is an operation past its deadline that the processor has no
	// fence to give up with (Processor.Fence): it stays processing.
	Unfenced string
	// SavedFailure is an operation whose call the processor answers with a
	// failure it saved for the key (ErrSavedFailure): it stays processing
	// until a lookup, the fence or the processor's webhook settles it.
	SavedFailure string
}

// Reviews are the kind's cases in the needs-review queue.
func (n Names) Reviews() Reviews {
	return Reviews{GivenUp: n.Type + "_given_up", Unknown: "unknown_" + n.Object, Duplicate: "duplicate_" + n.Object,
		AfterFailure: n.Done + "_after_failure", Mismatch: n.Object + "_amount_mismatch",
		Unfenced: n.Type + "_past_deadline", SavedFailure: n.Type + "_saved_failure"}
}

// All lists the cases.
func (r Reviews) All() []string {
	return []string{r.Unknown, r.Duplicate, r.AfterFailure, r.Mismatch, r.GivenUp, r.Unfenced, r.SavedFailure}
}

// ErrReviewNotFound reports a case that does not exist or is already resolved.
var ErrReviewNotFound = errors.New("no such open case")

// ReviewCase is one case an operator must look at.
type ReviewCase struct {
	ID         int64
	Kind       string
	Reference  string
	Detail     string
	CreatedAt  time.Time
	ResolvedAt *time.Time
}

const flagCase = `
INSERT INTO needs_review (kind, reference, detail) VALUES ($1, $2, $3)
ON CONFLICT (kind, reference) DO NOTHING`

// flagForReview records a case once, however often it is detected, and
// reports whether this call recorded it.
func flagForReview(ctx context.Context, db database.DBTX, kind, reference, detail string) (bool, error) {
	tag, err := db.Exec(ctx, flagCase, kind, reference, detail)
	if err != nil {
		return false, fmt.Errorf("flag %s %s for review: %w", kind, reference, err)
	}
	return tag.RowsAffected() == 1, nil
}

const listCases = `
SELECT id, kind, reference, detail, created_at, resolved_at FROM needs_review
WHERE $1 OR resolved_at IS NULL
ORDER BY id`

// ListReviewCases returns the open cases, oldest first, or every case when
// all is set.
func ListReviewCases(ctx context.Context, db database.DBTX, all bool) ([]ReviewCase, error) {
	rows, err := db.Query(ctx, listCases, all)
	if err != nil {
		return nil, fmt.Errorf("list review cases: %w", err)
	}
	cases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReviewCase, error) {
		var c ReviewCase
		err := row.Scan(&c.ID, &c.Kind, &c.Reference, &c.Detail, &c.CreatedAt, &c.ResolvedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list review cases: %w", err)
	}
	return cases, nil
}

const resolveCase = `UPDATE needs_review SET resolved_at = now() WHERE id = $1 AND resolved_at IS NULL`

// ResolveReviewCase marks an open case resolved, or returns ErrReviewNotFound.
func ResolveReviewCase(ctx context.Context, db database.DBTX, id int64) error {
	tag, err := db.Exec(ctx, resolveCase, id)
	if err != nil {
		return fmt.Errorf("resolve case %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrReviewNotFound
	}
	return nil
}

const countCases = `SELECT kind, count(*), count(*) FILTER (WHERE resolved_at IS NULL) FROM needs_review GROUP BY kind`

// CountReviewCases counts every case ever recorded, by kind (each distinct
// case once, however often it was detected, whichever replica found it), and
// those still open: the queue's depth.
func CountReviewCases(ctx context.Context, db database.DBTX) (ever, open map[string]int64, err error) {
	rows, err := db.Query(ctx, countCases)
	if err != nil {
		return nil, nil, fmt.Errorf("count review cases: %w", err)
	}
	ever, open = map[string]int64{}, map[string]int64{}
	var (
		kind    string
		n, left int64
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &n, &left}, func() error {
		ever[kind], open[kind] = n, left
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("count review cases: %w", err)
	}
	return ever, open, nil
}
