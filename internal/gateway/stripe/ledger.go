package stripe

import (
	"context"
	"fmt"
	"sort"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
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
			err = gateway.Unknownf("an empty page says more follow")
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
			return nil, "", gateway.Unknownf("an empty page says more follow")
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
