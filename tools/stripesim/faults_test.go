package stripesim_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// once is a Fault option giving fault to the first request with key, and
// none to any other.
func once(key string, fault stripesim.Fault) func(stripesim.Request) stripesim.Fault {
	var used atomic.Bool
	return func(r stripesim.Request) stripesim.Fault {
		if r.IdempotencyKey == key && used.CompareAndSwap(false, true) {
			return fault
		}
		return stripesim.FaultNone
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A saved 500 is answered again to the retry, replayed, and nothing is
	// made.
	t.Run("Saved500", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, Fault: once("key", stripesim.Fault500Saved)})
		_, err := e.create(ctx, charge(1000, "pm_card_visa", "key"))
		wantError(t, err, http.StatusInternalServerError, stripego.ErrorTypeAPI, "")
		_, err = e.create(ctx, charge(1000, "pm_card_visa", "key"))
		se := wantError(t, err, http.StatusInternalServerError, stripego.ErrorTypeAPI, "")
		if !replayed(se.LastResponse) {
			t.Error("the retry's 500 is not replayed")
		}
		if n := len(e.sim.PaymentIntents()); n != 0 {
			t.Errorf("%d payment intents; want none", n)
		}
	})

	// A 500 before executing saves nothing: the retry executes.
	t.Run("500Before", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, Fault: once("key", stripesim.Fault500Before)})
		_, err := e.create(ctx, charge(1000, "pm_card_visa", "key"))
		wantError(t, err, http.StatusInternalServerError, stripego.ErrorTypeAPI, "")
		if pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key")); replayed(pi.LastResponse) {
			t.Error("the retry was replayed")
		}
	})

	// A lost answer leaves the client with no answer, and the object made:
	// the retry replays it.
	t.Run("LoseAnswer", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, Fault: once("key", stripesim.FaultLoseAnswer)})
		_, err := e.create(ctx, charge(1000, "pm_card_visa", "key"))
		var se *stripego.Error
		if err == nil || errors.As(err, &se) {
			t.Fatalf("the lost answer gave %v; want a connection error", err)
		}
		made := e.sim.PaymentIntents()
		if len(made) != 1 || made[0].Status != stripesim.StatusSucceeded {
			t.Fatalf("the simulator holds %+v; want the one payment intent, succeeded", made)
		}
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key"))
		if pi.ID != made[0].ID || !replayed(pi.LastResponse) {
			t.Errorf("the retry answered %s, replayed %v; want %s replayed", pi.ID, replayed(pi.LastResponse), made[0].ID)
		}
		if st := e.sim.Stats(); st.Lost != 1 {
			t.Errorf("stats count %d lost; want 1", st.Lost)
		}
	})

	// A 429 executes nothing and saves nothing.
	t.Run("429", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, Fault: once("key", stripesim.Fault429)})
		_, err := e.create(ctx, charge(1000, "pm_card_visa", "key"))
		wantError(t, err, http.StatusTooManyRequests, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeRateLimit)
		if n := len(e.sim.PaymentIntents()); n != 0 {
			t.Errorf("%d payment intents; want none", n)
		}
		e.mustCreate(t, charge(1000, "pm_card_visa", "key"))
	})

	// FaultRates choose from the seed: a rate of 1 faults every request.
	t.Run("Rates", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, FaultRates: map[stripesim.Fault]float64{stripesim.Fault500Before: 1}})
		for range 3 {
			_, err := e.create(ctx, charge(1000, "pm_card_visa", ""))
			wantError(t, err, http.StatusInternalServerError, stripego.ErrorTypeAPI, "")
		}
		if _, err := stripesim.New(stripesim.Options{FaultRates: map[stripesim.Fault]float64{
			stripesim.Fault429: 0.6, stripesim.FaultLatency: 0.6}}); err == nil {
			t.Error("rates adding up to more than 1 were taken")
		}
	})
}

// TestRateLimit: past RateLimit requests a second, each is answered 429,
// and the bucket fills again as the clock moves.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true, RateLimit: 5})
	list := func() error {
		var page stripego.PaymentIntentList
		return e.get(t, "/v1/payment_intents", &stripego.PaymentIntentListParams{}, &page)
	}
	limited := 0
	for range 10 {
		if err := list(); err != nil {
			wantError(t, err, http.StatusTooManyRequests, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeRateLimit)
			limited++
		}
	}
	st := e.sim.Stats()
	if limited != 5 || st.ByStatus[http.StatusTooManyRequests] != 5 || st.ByStatus[http.StatusOK] != 5 ||
		st.Requests != 10 || st.MaxPerSecond != 10 {
		t.Errorf("%d limited, stats %+v; want 5 of 10 answered 429, 10 in one second", limited, st)
	}
	e.sim.Advance(time.Second)
	if err := list(); err != nil {
		t.Errorf("a second later: %v", err)
	}
}
