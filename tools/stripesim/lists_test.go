package stripesim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// TestListPaging: a list pages newest first both ways, as Stripe's does:
// starting_after the next older, ending_before the ones just newer, newest
// first too, has_more in the direction paged; created bounds the window.
func TestListPaging(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true})
	// p[0] is the oldest; two share their second.
	var p []string
	for i := range 5 {
		p = append(p, e.mustCreate(t, charge(1000, "pm_card_visa", fmt.Sprintf("key-%d", i))).ID)
		if i != 2 {
			e.sim.Advance(time.Second)
		}
	}
	created := make([]int64, 5)
	for i, pi := range e.sim.PaymentIntents() {
		created[i] = pi.Created.Unix()
	}
	list := func(lp stripego.ListParams, since, before int64) ([]string, bool) {
		t.Helper()
		params := &stripego.PaymentIntentListParams{ListParams: lp}
		if since != 0 || before != 0 {
			params.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: since, LesserThan: before}
		}
		var page stripego.PaymentIntentList
		if err := e.get(t, "/v1/payment_intents", params, &page); err != nil {
			t.Fatal(err)
		}
		if page.Data == nil || page.URL != "/v1/payment_intents" {
			t.Fatalf("the answer is not a list: %+v", page)
		}
		ids := make([]string, len(page.Data))
		for i, pi := range page.Data {
			ids[i] = pi.ID
		}
		return ids, page.HasMore
	}
	two := stripego.Int64(2)
	for _, tc := range []struct {
		name          string
		lp            stripego.ListParams
		since, before int64
		want          []string
		more          bool
	}{
		{"Newest", stripego.ListParams{Limit: two}, 0, 0, []string{p[4], p[3]}, true},
		{"StartingAfter", stripego.ListParams{Limit: two, StartingAfter: &p[3]}, 0, 0, []string{p[2], p[1]}, true},
		{"Oldest", stripego.ListParams{Limit: two, StartingAfter: &p[1]}, 0, 0, []string{p[0]}, false},
		{"EndingBefore", stripego.ListParams{Limit: two, EndingBefore: &p[0]}, 0, 0, []string{p[2], p[1]}, true},
		{"EndingBeforeNewest", stripego.ListParams{Limit: two, EndingBefore: &p[2]}, 0, 0, []string{p[4], p[3]}, false},
		{"EndingBeforeNone", stripego.ListParams{Limit: two, EndingBefore: &p[4]}, 0, 0, []string{}, false},
		{"DefaultLimit", stripego.ListParams{}, 0, 0, []string{p[4], p[3], p[2], p[1], p[0]}, false},
		{"Since", stripego.ListParams{}, created[2], 0, []string{p[4], p[3], p[2]}, false},
		{"Before", stripego.ListParams{}, 0, created[2], []string{p[1], p[0]}, false},
		{"SinceAfter", stripego.ListParams{Limit: stripego.Int64(1), StartingAfter: &p[4]}, created[2], 0, []string{p[3]}, true},
	} {
		ids, more := list(tc.lp, tc.since, tc.before)
		if !slices.Equal(ids, tc.want) || more != tc.more {
			t.Errorf("%s: %s has_more %v; want %s %v", tc.name, strings.Join(ids, " "), more, strings.Join(tc.want, " "), tc.more)
		}
	}
}
