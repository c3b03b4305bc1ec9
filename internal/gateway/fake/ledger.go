package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
)

// listObject is the processor's answer to a GET listing.
type listObject[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// getList calls GET path?query and decodes the list it answers. An answer
// that is not a list object, data included, wraps
// operation.ErrProcessorUnknown: an empty list must be said, not inferred.
func getList[T any](ctx context.Context, c *Client, path string, query url.Values) (listObject[T], error) {
	status, resp, err := c.do(ctx, http.MethodGet, path+"?"+query.Encode(), "", nil)
	if err != nil {
		return listObject[T]{}, err
	}
	if status != http.StatusOK {
		return listObject[T]{}, classify(status, resp)
	}
	var l listObject[T]
	if err := json.Unmarshal(resp, &l); err != nil {
		return listObject[T]{}, fmt.Errorf("%w: decode list: %w", operation.ErrProcessorUnknown, err)
	}
	if l.Object != "list" || l.Data == nil {
		return listObject[T]{}, fmt.Errorf("%w: the answer is not a list", operation.ErrProcessorUnknown)
	}
	return l, nil
}

// getFullList is getList for the listings that are never paged (by key,
// by payment): one that says more rows follow is incomplete, and what it
// lacks could be the very row asked about.
func getFullList[T any](ctx context.Context, c *Client, path string, query url.Values) ([]T, error) {
	l, err := getList[T](ctx, c, path, query)
	if err != nil {
		return nil, err
	}
	if l.HasMore {
		return nil, fmt.Errorf("%w: the listing is incomplete", operation.ErrProcessorUnknown)
	}
	return l.Data, nil
}

// ledger is every kind's Ledger: one page of the processor's ledger of the
// objects, what was created after since, oldest first, after the object
// cursor names ("" for the first page), each object made an entry. next is
// the id of the page's last object when another page follows, else "". Any
// failure wraps operation.ErrProcessorUnknown.
func (o objects[T]) ledger(ctx context.Context, c *Client, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	path := o.path()
	l, err := getList[T](ctx, c, path, c.pageQuery(since, cursor))
	if err != nil {
		return nil, "", fmt.Errorf("ledger %s: %w", path, gateway.Unknown(err))
	}
	page := make([]operation.LedgerEntry, len(l.Data))
	for i, o := range l.Data {
		page[i] = o.entry()
	}
	next, err := nextCursor(page, l.HasMore)
	if err != nil {
		return nil, "", fmt.Errorf("ledger %s: %w", path, err)
	}
	return page, next, nil
}

// pageQuery is the query of one ledger page.
func (c *Client) pageQuery(since time.Time, cursor string) url.Values {
	size := c.PageSize
	if size == 0 {
		size = DefaultPageSize
	}
	q := url.Values{
		"created_after": {since.UTC().Format(time.RFC3339Nano)},
		"limit":         {strconv.Itoa(size)},
	}
	if cursor != "" {
		q.Set("starting_after", cursor)
	}
	return q
}

// nextCursor is the cursor of the page after page: its last id when more
// follow.
func nextCursor(page []operation.LedgerEntry, hasMore bool) (string, error) {
	switch {
	case !hasMore:
		return "", nil
	case len(page) == 0:
		return "", fmt.Errorf("%w: an empty page says more follow", operation.ErrProcessorUnknown)
	}
	return page[len(page)-1].ID, nil
}
