package stripesim_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// refund refunds amount (0: what is left) of PaymentIntent pi.
func (e *env) refund(pi string, amount int64, key string) (*stripego.Refund, error) {
	params := &stripego.RefundCreateParams{PaymentIntent: stripego.String(pi), Metadata: map[string]string{"downstream_key": key}}
	if amount > 0 {
		params.Amount = stripego.Int64(amount)
	}
	if key != "" {
		params.SetIdempotencyKey(key)
	}
	return e.api.V1Refunds.Create(context.Background(), params)
}

// retrieveRefund retrieves refund id, which must be there.
func (e *env) retrieveRefund(t *testing.T, id string) *stripego.Refund {
	t.Helper()
	r, err := e.api.V1Refunds.Retrieve(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("retrieve refund %s: %v", id, err)
	}
	return r
}

func TestRefunds(t *testing.T) {
	t.Parallel()

	// A refund is pending RefundPendingFor, then succeeded; it names the
	// PaymentIntent and its charge.
	t.Run("PendingThenSucceeded", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-charge"))
		r, err := e.refund(pi.ID, 0, "key-refund")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != stripego.RefundStatusPending || r.Amount != 1000 || r.Currency != "usd" ||
			r.PaymentIntent.ID != pi.ID || r.Charge.ID != pi.LatestCharge.ID || r.Metadata["downstream_key"] != "key-refund" {
			t.Errorf("refund %+v; want pending, all 1000 usd of %s's charge %s", r, pi.ID, pi.LatestCharge.ID)
		}
		e.sim.Advance(2*time.Second - time.Millisecond)
		if got := e.retrieveRefund(t, r.ID); got.Status != stripego.RefundStatusPending {
			t.Errorf("before RefundPendingFor: %s; want pending", got.Status)
		}
		e.sim.Advance(time.Millisecond)
		if got := e.retrieveRefund(t, r.ID); got.Status != stripego.RefundStatusSucceeded {
			t.Errorf("after RefundPendingFor: %s; want succeeded", got.Status)
		}
		var types []string
		for _, ev := range e.sim.Events() {
			types = append(types, ev.Type)
		}
		for _, want := range []string{"refund.created", "charge.refunded", "refund.updated"} {
			if !slices.Contains(types, want) {
				t.Errorf("events %v; want a %s", types, want)
			}
		}
	})

	// Partial refunds refund what is left, and no more.
	t.Run("Partial", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-charge"))
		if _, err := e.refund(pi.ID, 400, "key-1"); err != nil {
			t.Fatal(err)
		}
		_, err := e.refund(pi.ID, 700, "key-2")
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeAmountTooLarge)
		rest, err := e.refund(pi.ID, 0, "key-2")
		if err != nil || rest.Amount != 600 {
			t.Fatalf("refund of what is left = %v, %v; want 600", rest, err)
		}
		_, err = e.refund(pi.ID, 0, "key-3")
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeChargeAlreadyRefunded)
	})

	// Only a succeeded PaymentIntent that exists is refunded.
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		_, err := e.create(context.Background(), charge(1000, "pm_card_chargeDeclined", "key-declined"))
		declined := stripeError(t, err).PaymentIntent.ID
		_, err = e.refund(declined, 0, "key-1")
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, "")
		_, err = e.refund("pi_missing", 0, "key-2")
		wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing)
		if n := len(e.sim.Refunds()); n != 0 {
			t.Errorf("%d refunds made; want none", n)
		}
	})

	// A refund of pm_card_refundFail succeeds, then fails, and its amount
	// can be refunded again.
	t.Run("FailsAfterSuccess", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		pi := e.mustCreate(t, charge(1000, "pm_card_refundFail", "key-charge"))
		r, err := e.refund(pi.ID, 0, "key-refund")
		if err != nil || r.Status != stripego.RefundStatusSucceeded {
			t.Fatalf("refund = %v, %v; want succeeded", r, err)
		}
		e.sim.Advance(2 * time.Second)
		got := e.retrieveRefund(t, r.ID)
		if got.Status != stripego.RefundStatusFailed || got.FailureReason != stripego.RefundFailureReasonExpiredOrCanceledCard {
			t.Errorf("later: %s (%s); want failed, expired_or_canceled_card", got.Status, got.FailureReason)
		}
		if !slices.ContainsFunc(e.sim.Events(), func(ev stripesim.Event) bool { return ev.Type == "refund.failed" }) {
			t.Error("no refund.failed event")
		}
		if _, err := e.refund(pi.ID, 0, "key-again"); err != nil {
			t.Errorf("refund after the failure: %v", err)
		}
	})

	// RefundFails fails a pending refund as it settles.
	t.Run("RefundFails", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true, RefundFails: func(r stripesim.Refund) string {
			if r.Amount == 123 {
				return "declined"
			}
			return ""
		}})
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-charge"))
		failing, err := e.refund(pi.ID, 123, "key-1")
		if err != nil {
			t.Fatal(err)
		}
		passing, err := e.refund(pi.ID, 100, "key-2")
		if err != nil {
			t.Fatal(err)
		}
		e.sim.Advance(2 * time.Second)
		if got := e.retrieveRefund(t, failing.ID); got.Status != stripego.RefundStatusFailed || got.FailureReason != "declined" {
			t.Errorf("refund of 123: %s (%s); want failed, declined", got.Status, got.FailureReason)
		}
		if got := e.retrieveRefund(t, passing.ID); got.Status != stripego.RefundStatusSucceeded {
			t.Errorf("refund of 100: %s; want succeeded", got.Status)
		}
	})

	// The list of one PaymentIntent's refunds holds only its, newest first.
	t.Run("ListByPaymentIntent", func(t *testing.T) {
		t.Parallel()
		e := start(t, stripesim.Options{ManualClock: true})
		a := e.mustCreate(t, charge(1000, "pm_card_visa", "key-a"))
		b := e.mustCreate(t, charge(1000, "pm_card_visa", "key-b"))
		var want []string
		for i, pi := range []string{a.ID, b.ID, a.ID} {
			r, err := e.refund(pi, 100, []string{"r1", "r2", "r3"}[i])
			if err != nil {
				t.Fatal(err)
			}
			if pi == a.ID {
				want = append([]string{r.ID}, want...)
			}
			e.sim.Advance(time.Second)
		}
		list := func(params *stripego.RefundListParams) ([]string, bool) {
			t.Helper()
			var page stripego.RefundList
			if err := e.get(t, "/v1/refunds", params, &page); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range page.Data {
				got = append(got, r.ID)
			}
			return got, page.HasMore
		}
		params := &stripego.RefundListParams{PaymentIntent: stripego.String(a.ID)}
		if got, more := list(params); !slices.Equal(got, want) || more {
			t.Errorf("refunds of %s: %v, has_more %v; want %v", a.ID, got, more, want)
		}
		// A refund is a cursor: after the newest, the older one.
		params.StartingAfter = stripego.String(want[0])
		if got, more := list(params); !slices.Equal(got, want[1:]) || more {
			t.Errorf("refunds of %s after %s: %v, has_more %v; want %v", a.ID, want[0], got, more, want[1:])
		}
	})
}
