package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
)

// listing answers a Stripe list of objects as Stripe pages it: newest first
// (objects are given so), created[gte] filtering, limit objects a page,
// starting_after the objects older than one, ending_before the limit
// objects just newer than one, has_more whether more follow that way.
func listing(t *testing.T, path string, objects []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			t.Errorf("limit = %q", q.Get("limit"))
		}
		gte, err := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
		if err != nil {
			t.Errorf("created[gte] = %q", q.Get("created[gte]"))
		}
		below := func(created int64) bool {
			lt, ltErr := strconv.ParseInt(q.Get("created[lt]"), 10, 64)
			lte, lteErr := strconv.ParseInt(q.Get("created[lte]"), 10, 64)
			return (ltErr != nil || created < lt) && (lteErr != nil || created <= lte)
		}
		var window []string
		index := -1
		for _, o := range objects {
			var head struct {
				ID      string `json:"id"`
				Created int64  `json:"created"`
			}
			if err := json.Unmarshal([]byte(o), &head); err != nil {
				t.Fatal(err)
			}
			if head.Created < gte || !below(head.Created) {
				continue
			}
			if head.ID == q.Get("starting_after") || head.ID == q.Get("ending_before") {
				index = len(window)
			}
			window = append(window, o)
		}
		page, more := window, false
		switch {
		case q.Get("starting_after") != "":
			page = window[index+1:]
			page, more = page[:min(limit, len(page))], len(page) > limit
		case q.Get("ending_before") != "":
			page = window[:index]
			page, more = page[max(0, len(page)-limit):], len(page) > limit
		default:
			page, more = page[:min(limit, len(page))], len(page) > limit
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(list(path, more, page...)))
	}
}

// walk reads a whole ledger, page by page, and returns its entries and
// how many pages it took.
func walk(t *testing.T, ledger func(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error), since time.Time) ([]operation.LedgerEntry, int) {
	t.Helper()
	var all []operation.LedgerEntry
	cursor := ""
	for pages := 1; ; pages++ {
		page, next, err := ledger(context.Background(), since, cursor)
		if err != nil {
			t.Fatalf("page %d (cursor %q): %v", pages, cursor, err)
		}
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		if pages > 20 {
			t.Fatalf("no end after %d pages", pages)
		}
		cursor = next
	}
}

// TestLedgerCharges: the PaymentIntents of the window, oldest first across
// pages, fence PaymentIntents aside.
func TestLedgerCharges(t *testing.T) {
	t.Parallel()
	const t0 = 1_700_000_000
	// Newest first, as Stripe lists: pi_7 … pi_1, a fence, and one older
	// than the window.
	var objects []string
	for i := 7; i >= 1; i-- {
		status := "succeeded"
		if i%3 == 0 {
			status = "canceled"
		}
		key := fmt.Sprintf("charge_pay_%d", i)
		objects = append(objects, paymentIntent(fmt.Sprintf("pi_%d", i), status, key, map[string]any{
			"created": t0 + i*60, "amount": 100 * i,
			"metadata": map[string]string{"downstream_key": key, "payment_id": fmt.Sprintf("pay_%d", i)}}))
		if i == 4 {
			objects = append(objects, paymentIntent("pi_f", "canceled", "refund_re_1", map[string]any{"created": t0 + 4*60,
				"metadata": map[string]string{"fence": "true", "downstream_key": "refund_re_1"}}))
		}
	}
	objects = append(objects, paymentIntent("pi_0", "succeeded", "charge_pay_0", map[string]any{"created": t0 - 3600}))
	s := serve(t, map[string][]reply{"GET /v1/payment_intents": {{serve: listing(t, "/v1/payment_intents", objects)}}})
	since := time.Unix(t0, 0)

	got, pages := walk(t, s.client(t, 5*time.Second, 3).LedgerCharges, since)
	var want []operation.LedgerEntry
	for i := 1; i <= 7; i++ {
		want = append(want, operation.LedgerEntry{ID: fmt.Sprintf("pi_%d", i), IdempotencyKey: fmt.Sprintf("charge_pay_%d", i),
			Reference: fmt.Sprintf("pay_%d", i), Succeeded: i%3 != 0, Amount: int64(100 * i), Currency: "USD",
			CreatedAt: time.Unix(int64(t0+i*60), 0).UTC()})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ledger =\n%+v\nwant\n%+v", got, want)
	}
	// The first page was found by narrowing the window's creation times
	// (the whole window first, then halves of it), never walked page by
	// page; two pages followed, each asked by ending_before.
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}
	reqs := s.requests("GET /v1/payment_intents")
	var cursors []string
	for i, r := range reqs {
		wantForm(t, r.form, map[string]string{"limit": "3", "created[gte]": strconv.Itoa(t0)})
		if i == 0 && (r.form.Get("created[lt]") != "" || r.form.Get("created[lte]") != "") {
			t.Errorf("first request %v, want the whole window", r.form)
		}
		if r.form.Get("starting_after") != "" {
			t.Errorf("request %d walked the window: %v", i, r.form)
		}
		if e := r.form.Get("ending_before"); e != "" {
			cursors = append(cursors, e)
		}
	}
	if len(cursors) != pages-1 {
		t.Errorf("ending_before = %q over %d pages, want one a page after the first", cursors, pages)
	}
	// About log2 of the window in seconds to find the oldest page.
	if probes := len(reqs) - len(cursors); probes > 40 {
		t.Errorf("%d requests to find the oldest page", probes)
	}
}

// TestLedgerRefunds: the refunds of the window this service made, oldest
// first, each naming the refund of ours its downstream key does.
func TestLedgerRefunds(t *testing.T) {
	t.Parallel()
	objects := []string{
		refund("re_3", "pending", "", map[string]any{"created": 1_700_000_300, "metadata": map[string]string{}}),
		refund("re_2", "succeeded", "refund_re_ours2", map[string]any{"created": 1_700_000_200}),
		refund("re_1", "failed", "refund_re_ours1", map[string]any{"created": 1_700_000_100, "currency": "eur"}),
	}
	s := serve(t, map[string][]reply{"GET /v1/refunds": {{serve: listing(t, "/v1/refunds", objects)}}})
	got, _ := walk(t, s.client(t, 5*time.Second, 2).LedgerRefunds, time.Unix(1_700_000_000, 0))
	want := []operation.LedgerEntry{
		{ID: "re_1", IdempotencyKey: "refund_re_ours1", Reference: "re_ours1", Amount: 500, Currency: "EUR", CreatedAt: time.Unix(1_700_000_100, 0).UTC()},
		{ID: "re_2", IdempotencyKey: "refund_re_ours2", Reference: "re_ours2", Succeeded: true, Amount: 500, Currency: "USD",
			CreatedAt: time.Unix(1_700_000_200, 0).UTC()},
		// re_3, made elsewhere (no downstream key), is not the service's.
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ledger =\n%+v\nwant\n%+v", got, want)
	}
}

// TestLedgerOnePage: a window on one page is that page, and no cursor.
func TestLedgerOnePage(t *testing.T) {
	t.Parallel()
	s := serve(t, map[string][]reply{"GET /v1/refunds": {ok(list("/v1/refunds", false,
		refund("re_2", "succeeded", "refund_re_2", map[string]any{"created": 1_700_000_200}),
		refund("re_1", "succeeded", "refund_re_1", nil)))}})
	page, next, err := s.client(t, 5*time.Second, 0).LedgerRefunds(context.Background(), time.Unix(1_700_000_000, 0), "")
	if err != nil || next != "" || len(page) != 2 || page[0].ID != "re_1" || page[1].ID != "re_2" {
		t.Fatalf("page = %+v, next %q, %v", page, next, err)
	}
	wantForm(t, s.requests("GET /v1/refunds")[0].form, map[string]string{"limit": "100"})
}

// TestLedgerUnknown: a ledger page Stripe does not answer whole is unknown.
func TestLedgerUnknown(t *testing.T) {
	t.Parallel()
	for name, rep := range map[string]reply{
		"ServerError":        failure(http.StatusInternalServerError, "api_error", "", nil),
		"RateLimited":        failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil),
		"MoreWithoutObjects": ok(list("/v1/payment_intents", true)),
		"NotAList":           ok(`{"object":"list","has_more":false}`),
		"Dropped":            {drop: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, map[string][]reply{"GET /v1/payment_intents": {rep}})
			for _, cursor := range []string{"", "pi_1"} {
				_, _, err := s.client(t, 5*time.Second, 0).LedgerCharges(context.Background(), time.Unix(1_700_000_000, 0), cursor)
				check(t, unknown, operation.Outcome{}, operation.Outcome{}, err)
			}
		})
	}
}
