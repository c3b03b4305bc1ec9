package stripe

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/refunds"
)

// row is one object of a list page: its id, the cursor that pages from it,
// and its ledger entry, nil for a fence PaymentIntent.
type row struct {
	id    string
	entry *operation.LedgerEntry
}

// listPage asks for one page of a list as lp says (its limit and cursor),
// newest first as Stripe lists, and reports whether more follow in the
// direction lp pages.
type listPage func(lp stripego.ListParams) (rows []row, more bool, err error)

// LedgerCharges lists one page of the PaymentIntents created at or after
// since, oldest first (payments.Processor), fence PaymentIntents aside; an
// entry's Reference is the payment its metadata names. The first page
// (cursor "") walks the window to its oldest end: one request per
// Config.PageSize PaymentIntents of the window.
func (c *Client) LedgerCharges(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return c.ledger(ctx, "payment intents", cursor, func(lp stripego.ListParams) ([]row, bool, error) {
		params := &stripego.PaymentIntentListParams{ListParams: lp,
			CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
		var page stripego.PaymentIntentList
		if err := c.get("/v1/payment_intents", params, &page); err != nil {
			return nil, false, err
		}
		if page.Data == nil {
			return nil, false, unknownf("the answer is not a list of payment intents")
		}
		rows := make([]row, len(page.Data))
		for i, pi := range page.Data {
			if pi == nil {
				return nil, false, unknownf("a null payment intent in a list")
			}
			rows[i].id = pi.ID
			if !isFence(pi) {
				rows[i].entry = &operation.LedgerEntry{ID: pi.ID, IdempotencyKey: pi.Metadata[metaDownstreamKey],
					Reference: pi.Metadata[metaPaymentID], Succeeded: pi.Status == stripego.PaymentIntentStatusSucceeded,
					Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)), CreatedAt: time.Unix(pi.Created, 0).UTC()}
			}
		}
		return rows, page.HasMore, nil
	})
}

// LedgerRefunds lists one page of the refunds created at or after since,
// oldest first (refunds.Processor); an entry's Reference is the refund its
// downstream key names, empty for a refund made under no key of ours. The
// first page walks the window as LedgerCharges's does.
func (c *Client) LedgerRefunds(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return c.ledger(ctx, "refunds", cursor, func(lp stripego.ListParams) ([]row, bool, error) {
		page, err := c.refundPage(&stripego.RefundListParams{ListParams: lp,
			CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()}})
		if err != nil {
			return nil, false, err
		}
		rows := make([]row, len(page.Data))
		for i, r := range page.Data {
			if r == nil {
				return nil, false, unknownf("a null refund in a list")
			}
			key := r.Metadata[metaDownstreamKey]
			ours, ok := strings.CutPrefix(key, refunds.Names.DownstreamKey(""))
			if !ok {
				ours = ""
			}
			rows[i] = row{id: r.ID, entry: &operation.LedgerEntry{ID: r.ID, IdempotencyKey: key, Reference: ours,
				Succeeded: r.Status == stripego.RefundStatusSucceeded, Amount: r.Amount,
				Currency: strings.ToUpper(string(r.Currency)), CreatedAt: time.Unix(r.Created, 0).UTC()}}
		}
		return rows, page.HasMore, nil
	})
}

// ledger is every kind's Ledger over list, a list Stripe gives newest
// first: one page oldest first, and the cursor of the next ("" after the
// last). The cursor is the newest object of the page returned; the page
// after it is the objects just newer (ending_before), which Stripe gives
// newest first too and which are reordered. Any failure wraps
// operation.ErrProcessorUnknown.
func (c *Client) ledger(ctx context.Context, name, cursor string, list listPage) ([]operation.LedgerEntry, string, error) {
	lp := stripego.ListParams{Context: ctx, Limit: stripego.Int64(int64(c.cfg.PageSize))}
	var (
		rows []row
		next string
		err  error
	)
	if cursor == "" {
		rows, next, err = oldestPage(lp, list)
	} else {
		lp.EndingBefore = stripego.String(cursor)
		var more bool
		rows, more, err = list(lp)
		switch {
		case err != nil:
		case more && len(rows) == 0:
			err = unknownf("an empty page says more follow")
		case more:
			next = rows[0].id
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("ledger of %s: %w", name, unknown(err))
	}
	return entries(rows), next, nil
}

// oldestPage walks a list from its newest object to its oldest, page by
// page (starting_after), and returns the last page that had any, with the
// cursor of the page after it: its newest object's id when newer pages came
// before it, else "".
func oldestPage(lp stripego.ListParams, list listPage) ([]row, string, error) {
	var (
		last  []row
		newer bool
	)
	for {
		rows, more, err := list(lp)
		if err != nil {
			return nil, "", err
		}
		if len(rows) > 0 {
			newer, last = last != nil, rows
		}
		if !more {
			break
		}
		if len(rows) == 0 {
			return nil, "", unknownf("an empty page says more follow")
		}
		lp.StartingAfter = stripego.String(rows[len(rows)-1].id)
	}
	if !newer {
		return last, "", nil
	}
	return last, last[0].id, nil
}

// entries are the ledger entries of rows, oldest first (by creation, then
// id, as Stripe's second-granular times tie).
func entries(rows []row) []operation.LedgerEntry {
	page := make([]operation.LedgerEntry, 0, len(rows))
	for _, r := range rows {
		if r.entry != nil {
			page = append(page, *r.entry)
		}
	}
	sort.SliceStable(page, func(i, j int) bool {
		if !page[i].CreatedAt.Equal(page[j].CreatedAt) {
			return page[i].CreatedAt.Before(page[j].CreatedAt)
		}
		return page[i].ID < page[j].ID
	})
	return page
}
