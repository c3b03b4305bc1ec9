package stripesim_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A retry with the key and the same parameters gets the first answer,
	// said to be replayed, and nothing new is made.
	t.Run("Replayed", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		first := e.mustCreate(t, charge(1000, "pm_card_visa", "key-replayed"))
		if replayed(first.LastResponse) {
			t.Error("the first answer says it was replayed")
		}
		// Parameters sent in another order are the same parameters.
		params := charge(1000, "pm_card_visa", "key-replayed")
		params.Metadata = map[string]string{"downstream_key": "key-replayed"}
		again := e.mustCreate(t, params)
		if again.ID != first.ID || !replayed(again.LastResponse) {
			t.Errorf("retry answered %s, replayed %v; want %s replayed", again.ID, replayed(again.LastResponse), first.ID)
		}
		if got := again.LastResponse.Header.Get("Original-Request"); got != first.LastResponse.RequestID {
			t.Errorf("Original-Request %q; want the first request's %q", got, first.LastResponse.RequestID)
		}
		if n := len(e.sim.PaymentIntents()); n != 1 {
			t.Errorf("%d payment intents; want 1", n)
		}
	})

	// The key with other parameters is an idempotency_error.
	t.Run("OtherParameters", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		e.mustCreate(t, charge(1000, "pm_card_visa", "key-params"))
		_, err := e.create(ctx, charge(2000, "pm_card_visa", "key-params"))
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeIdempotency, "")
	})

	// The key on another endpoint is an idempotency_error too.
	t.Run("OtherEndpoint", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-endpoint"))
		params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(pi.ID)}
		params.SetIdempotencyKey("key-endpoint")
		_, err := e.api.V1Refunds.Create(ctx, params)
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeIdempotency, "")
		if n := len(e.sim.Refunds()); n != 0 {
			t.Errorf("%d refunds; want none", n)
		}
	})

	// While the first request with a key executes, another with it is a
	// 409; once the first is done, its answer is replayed.
	t.Run("InFlight", func(t *testing.T) {
		t.Parallel()
		var slowed atomic.Bool
		e := start(t, stripesim.Options{ManualClock: true, Latency: time.Hour, Fault: func(r stripesim.Request) stripesim.Fault {
			if r.IdempotencyKey == "key-slow" && slowed.CompareAndSwap(false, true) {
				return stripesim.FaultLatency
			}
			return stripesim.FaultNone
		}})
		slow, cancel := context.WithCancel(ctx)
		defer cancel()
		first := make(chan error, 1)
		go func() {
			_, err := e.create(slow, charge(1000, "pm_card_visa", "key-slow"))
			first <- err
		}()
		// The latency comes after the PaymentIntent is made, while the
		// request still holds its key.
		waitFor(t, "the first request to make its payment intent", func() bool { return len(e.sim.PaymentIntents()) == 1 })
		_, err := e.create(ctx, charge(1000, "pm_card_visa", "key-slow"))
		wantError(t, err, http.StatusConflict, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeIdempotencyKeyInUse)

		// The first client gives up; the request, executed, saves its
		// answer as its connection closes.
		cancel()
		if err := <-first; err == nil {
			t.Fatal("the first request was answered through an hour of latency")
		}
		var pi *stripego.PaymentIntent
		waitFor(t, "the key to be answered", func() bool {
			pi, err = e.create(ctx, charge(1000, "pm_card_visa", "key-slow"))
			return err == nil
		})
		if made := e.sim.PaymentIntents(); pi.ID != made[0].ID || !replayed(pi.LastResponse) || len(made) != 1 {
			t.Errorf("after the first request, the key answered %s (replayed %v); want %s replayed, the only one made",
				pi.ID, replayed(pi.LastResponse), made[0].ID)
		}
	})

	// A key is kept KeyRetention, then forgotten: a request with it is
	// made anew, whatever its parameters.
	t.Run("Pruned", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		first := e.mustCreate(t, charge(1000, "pm_card_visa", "key-pruned"))
		e.sim.Advance(24*time.Hour - time.Second)
		_, err := e.create(ctx, charge(2000, "pm_card_visa", "key-pruned"))
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeIdempotency, "")
		e.sim.Advance(time.Second)
		again := e.mustCreate(t, charge(1000, "pm_card_visa", "key-pruned"))
		if again.ID == first.ID || replayed(again.LastResponse) {
			t.Errorf("after 24h the key answered %s, replayed %v; want a new payment intent", again.ID, replayed(again.LastResponse))
		}
		other := e.mustCreate(t, charge(1000, "pm_card_visa", "key-pruned"))
		if !replayed(other.LastResponse) || other.ID != again.ID {
			t.Errorf("the key made anew is not kept: %s replayed %v", other.ID, replayed(other.LastResponse))
		}
	})

	// A request refused by validation saves nothing: the key then executes
	// a corrected request.
	t.Run("ValidationNotSaved", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		_, err := e.create(ctx, charge(10, "pm_card_visa", "key-invalid"))
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeAmountTooSmall)
		_, err = e.create(ctx, charge(1000, "card_visa", "key-invalid"))
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing)
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-invalid"))
		if replayed(pi.LastResponse) || pi.Status != stripego.PaymentIntentStatusSucceeded {
			t.Errorf("corrected request answered %s, replayed %v", pi.Status, replayed(pi.LastResponse))
		}
		// A refused API key saves nothing either.
		other, _ := client(e.url, "pk_test_publishable")
		_, err = other.V1PaymentIntents.Create(ctx, charge(2000, "pm_card_visa", "key-auth"))
		wantError(t, err, http.StatusUnauthorized, stripego.ErrorTypeInvalidRequest, "")
		e.mustCreate(t, charge(1000, "pm_card_visa", "key-auth"))
	})

	// A decline made its PaymentIntent: the 402 is saved and replayed.
	t.Run("DeclineSaved", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		_, err := e.create(ctx, charge(1000, "pm_card_chargeDeclined", "key-declined"))
		first := wantError(t, err, http.StatusPaymentRequired, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
		_, err = e.create(ctx, charge(1000, "pm_card_chargeDeclined", "key-declined"))
		again := wantError(t, err, http.StatusPaymentRequired, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
		if again.PaymentIntent.ID != first.PaymentIntent.ID || !replayed(again.LastResponse) {
			t.Errorf("retry of a decline answered %s, replayed %v", again.PaymentIntent.ID, replayed(again.LastResponse))
		}
	})

	// Keys are the API key's: another key's client uses the same one
	// afresh.
	t.Run("ScopedToAPIKey", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		first := e.mustCreate(t, charge(1000, "pm_card_visa", "key-scoped"))
		other, _ := client(e.url, "sk_test_another")
		pi, err := other.V1PaymentIntents.Create(ctx, charge(2000, "pm_card_visa", "key-scoped"))
		if err != nil || pi.ID == first.ID || replayed(pi.LastResponse) {
			t.Errorf("another API key's request with the key = %v, %v; want a new payment intent", pi, err)
		}
	})
}
