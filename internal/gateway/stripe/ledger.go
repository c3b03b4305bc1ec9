package stripe

import (
	"context"
	"fmt"
	"sort"
	"time"

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
// of the objects created in created, newest first as Stripe lists, and
// reports whether more follow in the direction lp pages.
type listPage func(lp stripego.ListParams, created *stripego.RangeQueryParams) (rows []row, more bool, err error)

// ledger is every kind's Ledger over list, a list Stripe gives newest
// first, of the objects created at or after since: one page oldest first,
// and the cursor of the next ("" after the last). The first page is found
// by narrowing a range of creation times from since until it holds one
// page (oldestPage); the cursor is the newest object of the page returned,
// and the page after it is the objects just newer (ending_before), which
// Stripe gives newest first too and which are reordered. A pass over the
// window costs a request a page, and a few more to find the first, paced
// behind the calls (gateway.Pace). Any failure wraps operation.ErrProcessorUnknown.
func (c *Client) ledger(ctx context.Context, name string, since time.Time, cursor string, list listPage) ([]operation.LedgerEntry, string, error) {
	lp := stripego.ListParams{Context: ctx, Limit: stripego.Int64(int64(c.cfg.PageSize))}
	var (
		rows []row
		next string
		err  error
	)
	if cursor == "" {
		rows, next, err = oldestPage(lp, list, since.Unix(), time.Now().Unix())
	} else {
		lp.EndingBefore = stripego.String(cursor)
		var more bool
		rows, more, err = list(lp, &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()})
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

// oldestPage returns the oldest page of the objects created at or after
// since (Unix seconds), with the cursor of the page after it: "" when the
// window is that one page, else its newest object's id. A window of more
// than a page is narrowed by halves to a range [since, since+span) that
// holds one page (span up to now and a little more for the clocks): a few
// requests (about 17 for a day), not one per page of the window. A second
// holding more than a page is walked to its oldest end.
func oldestPage(lp stripego.ListParams, list listPage, since, now int64) ([]row, string, error) {
	// The whole window first: most often it is one page.
	rows, more, err := list(lp, &stripego.RangeQueryParams{GreaterThanOrEqual: since})
	switch {
	case err != nil:
		return nil, "", err
	case !more && len(rows) == 0:
		return nil, "", nil
	case !more:
		return rows, "", nil
	}
	// Narrowed by halves: [since, since+empty) holds none, [since,
	// since+full) more than a page, the window's span to begin with.
	empty, full := int64(0), max(now-since, 1)+clockSkewSeconds
	for full-empty > 1 {
		mid := empty + (full-empty)/2
		rows, more, err := list(lp, &stripego.RangeQueryParams{GreaterThanOrEqual: since, LesserThan: since + mid})
		switch {
		case err != nil:
			return nil, "", err
		case more:
			full = mid
		case len(rows) == 0:
			empty = mid
		default:
			// The range in one page: newer objects follow it, the next
			// page's to find.
			return rows, rows[0].id, nil
		}
	}
	// One second, since+empty, holds more than a page.
	return walkToOldest(lp, list, since+empty)
}

// walkToOldest walks the objects created in second at, more than a page,
// from the newest to the oldest (starting_after), and returns the last
// page with the cursor of the objects after it.
func walkToOldest(lp stripego.ListParams, list listPage, at int64) ([]row, string, error) {
	var last []row
	for {
		rows, more, err := list(lp, &stripego.RangeQueryParams{GreaterThanOrEqual: at, LesserThanOrEqual: at})
		if err != nil {
			return nil, "", err
		}
		if len(rows) > 0 {
			last = rows
		}
		if !more {
			break
		}
		if len(rows) == 0 {
			return nil, "", gateway.Unknownf("an empty page says more follow")
		}
		lp.StartingAfter = stripego.String(rows[len(rows)-1].id)
	}
	if len(last) == 0 {
		return nil, "", gateway.Unknownf("a page said more follow in second %d, and none did", at)
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
