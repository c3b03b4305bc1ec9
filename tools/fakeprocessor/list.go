package fakeprocessor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

const (
	// MaxListCharges is the largest limit of one ledger page, of any object.
	MaxListCharges = 1000
	// DefaultListLimit is the size of a ledger page when no limit is given.
	DefaultListLimit = 100
)

// filterCreatedAfter is the filter that pages through the ledger.
const filterCreatedAfter = "created_after"

// list is the list object of every GET listing. HasMore is set when a
// ledger page stopped at its limit; the other filters answer in full.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// page is the position of a created_after listing: rows created after since,
// oldest first by (created_at, id), strictly after the row startingAfter
// when it is set, at most limit of them.
type page struct {
	since         time.Time
	startingAfter string
	limit         int
}

// listQuery is a validated list request: exactly one filter, and the page
// when that filter is created_after.
type listQuery struct {
	filter, value string
	page          page
}

// errUnknownCursor reports a starting_after that names no row of the ledger.
var errUnknownCursor = errors.New("starting_after names no row")

// parseListQuery checks that q holds exactly one of filters or created_after,
// and that limit and starting_after, which only page a created_after
// listing, are valid. The ledger is never listed whole in one answer.
func parseListQuery(q url.Values, filters ...string) (listQuery, *apiError) {
	filters = append(filters, filterCreatedAfter)
	oneOf := "Pass one of " + strings.Join(filters[:len(filters)-1], ", ") + " or " + filterCreatedAfter + "."
	var lq listQuery
	n := 0
	for _, f := range filters {
		if v := q.Get(f); v != "" {
			lq.filter, lq.value = f, v
			n++
		}
	}
	switch {
	case n == 0:
		e := invalid("parameter_missing", oneOf)
		return listQuery{}, &e
	case n > 1:
		e := invalid("parameter_invalid", oneOf)
		return listQuery{}, &e
	case lq.filter != filterCreatedAfter:
		if q.Has("limit") || q.Has("starting_after") {
			e := invalid("parameter_invalid", "limit and starting_after page a created_after listing only.")
			return listQuery{}, &e
		}
		return lq, nil
	}

	since, err := time.Parse(time.RFC3339Nano, lq.value)
	if err != nil {
		e := invalid("parameter_invalid", "created_after must be an RFC 3339 timestamp.")
		return listQuery{}, &e
	}
	lq.page = page{since: since, startingAfter: q.Get("starting_after"), limit: DefaultListLimit}
	if q.Has("limit") {
		lq.page.limit, err = strconv.Atoi(q.Get("limit"))
		if err != nil || lq.page.limit < 1 || lq.page.limit > MaxListCharges {
			e := invalid("parameter_invalid", fmt.Sprintf("limit must be an integer from 1 to %d.", MaxListCharges))
			return listQuery{}, &e
		}
	}
	if q.Has("starting_after") && lq.page.startingAfter == "" {
		e := invalid("parameter_invalid", "starting_after must be the id of the last row of the previous page.")
		return listQuery{}, &e
	}
	return lq, nil
}

// table is how an object's table is read, each query a constant next to
// the object's code: scan reads the columns every query selects, in their
// order.
type table[T any] struct {
	scan func(pgx.Row) (T, error)
	// byKeySQL selects the rows made under an idempotency key ($1), oldest
	// first.
	byKeySQL string
	// filters are the other listings answered in full (payment_id, say).
	filters []filter
	// createdAtSQL reads the created_at of the row $1, a page's cursor;
	// pageSQL is one ledger page (listPage).
	createdAtSQL, pageSQL string
}

// filter is a listing answered in full, GET /v1/<objects>?<name>=V: sql
// selects the rows whose <name> is V ($1), oldest first.
type filter struct {
	name, sql string
}

// handleList returns the handler of GET /v1/<objects>: ?idempotency_key=K
// or another of t's filters, answered in full, or a ledger page,
// ?created_after=RFC3339[&limit=N][&starting_after=ID]. Exactly one filter
// is required.
func handleList[T any](s *Server, t table[T]) http.HandlerFunc {
	filters := append([]filter{{"idempotency_key", t.byKeySQL}}, t.filters...)
	return func(w http.ResponseWriter, r *http.Request) {
		names := make([]string, len(filters))
		for i, f := range filters {
			names[i] = f.name
		}
		lq, apiErr := parseListQuery(r.URL.Query(), names...)
		if apiErr != nil {
			writeError(w, http.StatusBadRequest, *apiErr)
			return
		}
		var (
			l   = list[T]{Object: "list"}
			err error
		)
		if i := slices.IndexFunc(filters, func(f filter) bool { return f.name == lq.filter }); i >= 0 {
			l.Data, err = queryAll(r.Context(), s.pool, filters[i].sql, t.scan, lq.value)
		} else {
			l.Data, l.HasMore, err = listPage(r.Context(), s.pool, t.createdAtSQL, t.pageSQL, t.scan, lq.page)
		}
		writeList(s, w, r, l, err)
	}
}

// writeList answers a listing, or the error that stopped it.
func writeList[T any](s *Server, w http.ResponseWriter, r *http.Request, l list[T], err error) {
	switch {
	case errors.Is(err, errUnknownCursor):
		writeError(w, http.StatusBadRequest, invalid("parameter_invalid", "starting_after must be the id of a row of the previous page."))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, l)
	}
}

// listPage reads one ledger page with pageSQL, looking the cursor row up
// with cursorSQL first. It reads one row more than the limit to tell
// whether another page follows.
func listPage[T any](ctx context.Context, db database.DBTX, cursorSQL, pageSQL string, scan func(pgx.Row) (T, error), p page) ([]T, bool, error) {
	// Without a cursor the (created_at, id) bound is implied by since.
	after, afterID := p.since, ""
	if p.startingAfter != "" {
		err := db.QueryRow(ctx, cursorSQL, p.startingAfter).Scan(&after)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, false, errUnknownCursor
		case err != nil:
			return nil, false, fmt.Errorf("read cursor: %w", err)
		}
		afterID = p.startingAfter
	}
	rows, err := db.Query(ctx, pageSQL, p.since, after, afterID, p.limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list page: %w", err)
	}
	data, err := collect(rows, scan)
	if err != nil {
		return nil, false, err
	}
	if len(data) > p.limit {
		return data[:p.limit], true, nil
	}
	return data, false, nil
}

// queryAll runs query with args and scans every row it returns.
func queryAll[T any](ctx context.Context, db database.DBTX, query string, scan func(pgx.Row) (T, error), args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return collect(rows, scan)
}

// collect scans rows into a non-nil slice, so that an empty list is encoded
// as [] rather than null.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	data := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		data = append(data, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read rows: %w", err)
	}
	return data, nil
}
