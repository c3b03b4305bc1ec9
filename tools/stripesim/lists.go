package stripesim

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// pagingParams are the parameters every list takes.
var pagingParams = []string{"limit", "starting_after", "ending_before", "created", "created[gt]", "created[gte]",
	"created[lt]", "created[lte]", "expand[]"}

// The limits of a page: a list's or a search's.
const (
	defaultLimit = 10
	maxLimit     = 100
)

// paging is how a list is asked for: a page of up to limit objects after
// one cursor (older than starting_after, or newer than ending_before),
// created from from to to, in Unix seconds, both included.
type paging struct {
	limit                       int
	startingAfter, endingBefore string
	from, to                    int64
}

// limit is the limit parameter: 1 to 100, 10 if absent.
func (f *form) limit() int {
	n, ok := f.integer("limit")
	switch {
	case !ok:
		return defaultLimit
	case n < 1:
		f.fail(badRequest("limit", "", fmt.Sprintf("This value must be greater than or equal to 1 (it currently is '%d').", n)))
	case n > maxLimit:
		f.fail(badRequest("limit", "", fmt.Sprintf("This value must be less than or equal to %d (it currently is '%d').", maxLimit, n)))
	}
	return int(n)
}

// paging reads pagingParams.
func (f *form) paging() paging {
	p := paging{limit: f.limit(), startingAfter: f.str("starting_after"), endingBefore: f.str("ending_before"),
		from: math.MinInt64, to: math.MaxInt64}
	if p.startingAfter != "" && p.endingBefore != "" {
		f.fail(badRequest("ending_before", "parameters_exclusive",
			"You may only specify one of these parameters: ending_before, starting_after."))
	}
	bound := func(name string, apply func(int64)) {
		v := f.str(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			f.fail(badRequest(name, "parameter_invalid_integer", "Invalid integer: "+v))
			return
		}
		apply(n)
	}
	bound("created", func(n int64) { p.from, p.to = max(p.from, n), min(p.to, n) })
	bound("created[gte]", func(n int64) { p.from = max(p.from, n) })
	bound("created[gt]", func(n int64) { p.from = max(p.from, n+1) })
	bound("created[lte]", func(n int64) { p.to = min(p.to, n) })
	bound("created[lt]", func(n int64) { p.to = min(p.to, n-1) })
	return p
}

// listJSON is a list on the wire.
type listJSON struct {
	Object  string `json:"object"`
	Data    any    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// listed is an object a list pages over: when it was made, and its
// position, its index among the objects of its kind.
type listed interface {
	created() time.Time
	position() int
}

// list answers a GET of the list at url: the page p asks for, as listPage
// pages it, each object in its wire form.
func list[T listed, W any](all []T, byID map[string]T, p paging, kind, url string, keep func(T) bool, wire func(T) W) (any, *apiError) {
	page, more, err := listPage(all, byID, p, kind, keep)
	if err != nil {
		return nil, err
	}
	data := make([]W, len(page))
	for i, v := range page {
		data[i] = wire(v)
	}
	return listJSON{Object: "list", Data: data, HasMore: more, URL: url}, nil
}

// listPage is the page p asks for of all, objects kept oldest first, as
// Stripe pages a list: newest first, the objects keep takes in p's created
// range, and whether more follow in the direction p pages. From the newest
// (no cursor) or older than starting_after, it is the limit next older;
// with ending_before, the limit just newer than the cursor, newest first
// too, and more means newer ones still. byID finds a cursor, an object of
// kind.
func listPage[T listed](all []T, byID map[string]T, p paging, kind string, keep func(T) bool) ([]T, bool, *apiError) {
	match := func(v T) bool {
		t := v.created().Unix()
		return t >= p.from && t <= p.to && (keep == nil || keep(v))
	}
	cursor := func(param, id string) (int, *apiError) {
		v, ok := byID[id]
		if !ok {
			return 0, noSuch(http.StatusBadRequest, kind, id, param)
		}
		return v.position(), nil
	}
	var (
		out  []T
		more bool
	)
	take := func(v T) bool {
		if !match(v) {
			return true
		}
		if len(out) == p.limit {
			more = true
			return false
		}
		out = append(out, v)
		return true
	}
	if p.endingBefore != "" {
		i, err := cursor("ending_before", p.endingBefore)
		if err != nil {
			return nil, false, err
		}
		for j := i + 1; j < len(all) && take(all[j]); j++ {
		}
		slices.Reverse(out)
		return out, more, nil
	}
	start := len(all) - 1
	if p.startingAfter != "" {
		i, err := cursor("starting_after", p.startingAfter)
		if err != nil {
			return nil, false, err
		}
		start = i - 1
	}
	for j := start; j >= 0 && take(all[j]); j-- {
	}
	return out, more, nil
}
