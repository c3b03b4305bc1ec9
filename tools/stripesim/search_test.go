package stripesim_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// searchQuote escapes a value in a query's quotes, as the adapter does.
var searchQuote = strings.NewReplacer(`\`, `\\`, `'`, `\'`)

// search asks for one page of the PaymentIntents whose downstream_key is
// key.
func (e *env) search(t *testing.T, key string, limit int64, page *string) (*stripego.PaymentIntentSearchResult, error) {
	t.Helper()
	params := &stripego.PaymentIntentSearchParams{SearchParams: stripego.SearchParams{
		Query: fmt.Sprintf("metadata['downstream_key']:'%s'", searchQuote.Replace(key)),
		Limit: stripego.Int64(limit),
	}, Page: page}
	var result stripego.PaymentIntentSearchResult
	err := e.get(t, "/v1/payment_intents/search", params, &result)
	return &result, err
}

func TestSearch(t *testing.T) {
	t.Parallel()

	// A PaymentIntent is found only once its lag has passed, by its
	// metadata, quotes and backslashes escaped.
	t.Run("Lag", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true,
			SearchLag: func(stripesim.PaymentIntent) time.Duration { return 3 * time.Second }})
		key := `it's a \ key`
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", key))
		e.mustCreate(t, charge(1000, "pm_card_visa", "another"))
		if r, err := e.search(t, key, 10, nil); err != nil || r.Data == nil || len(r.Data) != 0 ||
			!strings.Contains(string(r.LastResponse.RawJSON), `"object":"search_result"`) {
			t.Fatalf("search before the lag = %+v, %v; want an empty search_result", r, err)
		}
		e.sim.Advance(3 * time.Second)
		r, err := e.search(t, key, 10, nil)
		if err != nil || len(r.Data) != 1 || r.Data[0].ID != pi.ID || r.HasMore {
			t.Fatalf("search after the lag = %+v, %v; want %s alone", r, err, pi.ID)
		}
	})

	// Results come newest first, limit a page, next_page the cursor.
	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		var ids []string
		for range 3 {
			// The same metadata, under no idempotency key of its own.
			params := charge(1000, "pm_card_visa", "")
			params.Metadata["downstream_key"] = "batch"
			ids = append(ids, e.mustCreate(t, params).ID)
			e.sim.Advance(time.Second)
		}
		e.sim.Advance(5 * time.Second)
		first, err := e.search(t, "batch", 2, nil)
		if err != nil || len(first.Data) != 2 || first.Data[0].ID != ids[2] || !first.HasMore || first.NextPage == nil {
			t.Fatalf("first page = %+v, %v; want the two newest and a next page", first, err)
		}
		second, err := e.search(t, "batch", 2, first.NextPage)
		if err != nil || len(second.Data) != 1 || second.Data[0].ID != ids[0] || second.HasMore || second.NextPage != nil {
			t.Fatalf("second page = %+v, %v; want the oldest, last", second, err)
		}
	})

	// An account without search is refused.
	t.Run("Unavailable", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, SearchUnavailable: true})
		_, err := e.search(t, "key", 10, nil)
		se := wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, "feature_not_available")
		if !strings.Contains(se.Msg, "unavailable") {
			t.Errorf("message %q does not say search is unavailable", se.Msg)
		}
	})
}
