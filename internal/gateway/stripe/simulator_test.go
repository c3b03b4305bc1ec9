package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/stripesim"
)

// onSimulator is a client of a Stripe simulator with opts, which keeps
// state as Stripe does (tools/stripesim), and the simulator.
func onSimulator(t *testing.T, opts stripesim.Options) (*stripe.Client, *stripesim.Server) {
	t.Helper()
	sim, url := stripesim.Serve(t, opts)
	c, err := stripe.New(stripe.Config{APIKey: "sk_test_simulated", APIBase: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, sim
}

// simCharge is a charge of amount in currency with method, made now by
// the simulator's clock.
func simCharge(sim *stripesim.Server, id string, amount int64, currency, method string) payments.ChargeRequest {
	return payments.ChargeRequest{IdempotencyKey: payments.Names.DownstreamKey(id), PaymentID: id, Amount: amount,
		Currency: currency, PaymentMethod: method, CreatedAt: sim.Now()}
}

// made are the PaymentIntents the simulator holds under key.
func made(sim *stripesim.Server, key string) []stripesim.PaymentIntent {
	var found []stripesim.PaymentIntent
	for _, pi := range sim.PaymentIntents() {
		if pi.Metadata["downstream_key"] == key && pi.Metadata["fence"] == "" {
			found = append(found, pi)
		}
	}
	return found
}

// TestAuthenticationRequired: a card that needs 3-D Secure is a definite
// decline with its code, never a PaymentIntent left in requires_action.
func TestAuthenticationRequired(t *testing.T) {
	t.Parallel()
	c, sim := onSimulator(t, stripesim.Options{})
	req := simCharge(sim, "pay_sca", 1500, "EUR", "pm_card_authenticationRequired")
	out, err := c.Charge(context.Background(), req)
	if err != nil || out.ID == "" || out.Succeeded || out.FailureCode != "authentication_required" {
		t.Fatalf("charge = %+v, %v; want a decline, authentication_required", out, err)
	}
	if pis := made(sim, req.IdempotencyKey); len(pis) != 1 || pis[0].Status != stripesim.StatusRequiresPaymentMethod {
		t.Fatalf("at Stripe: %+v", pis)
	}
}

// TestLookupWithoutSearch: a charge just made is found although the search
// lags, and on an account with no search at all (India's).
func TestLookupWithoutSearch(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]stripesim.Options{
		"SearchLags":        {SearchLag: func(stripesim.PaymentIntent) time.Duration { return time.Hour }},
		"SearchUnavailable": {SearchUnavailable: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, sim := onSimulator(t, opts)
			req := simCharge(sim, "pay_lookup", 1500, "USD", "pm_card_visa")
			if _, err := c.Charge(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			out, found, err := c.FindCharge(context.Background(), req)
			if err != nil || !found || !out.Succeeded {
				t.Fatalf("find = %+v, %v, %v; want the charge", out, found, err)
			}
			other := simCharge(sim, "pay_never", 1500, "USD", "pm_card_visa")
			if _, found, err := c.FindCharge(context.Background(), other); err != nil || found {
				t.Fatalf("find of a key never used = %v, %v; want none, definitely", found, err)
			}
		})
	}
}

// TestFenceHolds: the fence is a Customer, which no currency rule of the
// account can refuse; after it nothing can be made under the key, and a
// close asked again answers the same.
func TestFenceHolds(t *testing.T) {
	t.Parallel()
	c, sim := onSimulator(t, stripesim.Options{})
	for _, currency := range []string{"EUR", "JPY", "KWD"} {
		req := simCharge(sim, "pay_fenced_"+currency, 5000, currency, "pm_card_visa")
		for range 2 {
			if out, made, err := c.CloseCharge(context.Background(), req); err != nil || made {
				t.Fatalf("%s: close = %+v, %v, %v; want held, nothing made", currency, out, made, err)
			}
		}
		if _, err := c.Charge(context.Background(), req); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("%s: a charge after the fence: %v, want refused as unknown", currency, err)
		}
		if pis := made(sim, req.IdempotencyKey); len(pis) != 0 {
			t.Fatalf("%s: %d PaymentIntents made under a fenced key", currency, len(pis))
		}
	}
	fences := 0
	for _, cu := range sim.Customers() {
		if cu.Metadata["fence"] == "true" {
			fences++
		}
	}
	if fences != 3 {
		t.Fatalf("%d fence customers, want one a key", fences)
	}
	for _, pi := range sim.PaymentIntents() {
		t.Errorf("the fences made PaymentIntent %s (%d %s)", pi.ID, pi.Amount, pi.Currency)
	}
}

// TestSavedServerError: a 500 Stripe saved for the key is recognised on
// every replay of it, and the fence then waits for the lookup; once Stripe has
// forgotten the key, the fence holds and the lookup says nothing was made.
func TestSavedServerError(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(-30 * time.Hour)
	c, sim := onSimulator(t, stripesim.Options{Start: start, ManualClock: true, Fault: func(r stripesim.Request) stripesim.Fault {
		if r.Path == "/v1/payment_intents" && r.Method == "POST" {
			return stripesim.Fault500Saved
		}
		return stripesim.FaultNone
	}})
	req := simCharge(sim, "pay_saved", 1500, "USD", "pm_card_visa")
	// The first answer is a 500 like any other; Stripe replays it after.
	if _, err := c.Charge(context.Background(), req); errors.Is(err, operation.ErrSavedFailure) || !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("first charge = %v, want unknown", err)
	}
	for range 2 {
		if _, err := c.Charge(context.Background(), req); !errors.Is(err, operation.ErrSavedFailure) || !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("charge again = %v, want a saved failure", err)
		}
	}
	if _, _, err := c.CloseCharge(context.Background(), req); !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("close while Stripe keeps the saved 500: %v, want unknown", err)
	}
	sim.Advance(25 * time.Hour)
	if out, made, err := c.CloseCharge(context.Background(), req); err != nil || made {
		t.Fatalf("close once Stripe forgot the key = %+v, %v, %v; want held, nothing made", out, made, err)
	}
}

// TestRefundPendingPastTheWindow: a refund Stripe holds pending longer
// than a day is still found by its payment, not taken for none: the close,
// after Stripe forgot its key, reports it not final rather than nothing
// made, and once it succeeds it is found succeeded.
func TestRefundPendingPastTheWindow(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(-40 * time.Hour)
	c, sim := onSimulator(t, stripesim.Options{Start: start, ManualClock: true, RefundPendingFor: 36 * time.Hour})
	paid := simCharge(sim, "pay_refunded", 2000, "USD", "pm_card_visa")
	charged, err := c.Charge(context.Background(), paid)
	if err != nil || !charged.Succeeded {
		t.Fatalf("charge = %+v, %v", charged, err)
	}
	req := refunds.Request{IdempotencyKey: refunds.Names.DownstreamKey("re_slow"), ChargeID: charged.ID, Amount: 500,
		Currency: "USD", CreatedAt: sim.Now()}
	if _, err := c.Refund(context.Background(), req); !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("refund = %v, want unknown while pending", err)
	}
	sim.Advance(30 * time.Hour)
	if _, found, err := c.FindRefund(context.Background(), req); found || !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("find 30 h later = %v, %v; want pending, unknown", found, err)
	}
	if out, made, err := c.CloseRefund(context.Background(), req); made || !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("close 30 h later = %+v, %v, %v; want not final, unknown", out, made, err)
	}
	sim.Advance(7 * time.Hour)
	if out, found, err := c.FindRefund(context.Background(), req); err != nil || !found || !out.Succeeded {
		t.Fatalf("find once it succeeded = %+v, %v, %v", out, found, err)
	}
}

// TestLedgerOnSimulator: the ledger pages oldest first over a window whose
// objects crowd its newest second, lists only what this service made, in
// ISO 4217 minor units, and ends.
func TestLedgerOnSimulator(t *testing.T) {
	t.Parallel()
	sim, url := stripesim.Serve(t, stripesim.Options{Start: time.Now().Add(-time.Hour), ManualClock: true})
	c, err := stripe.New(stripe.Config{APIKey: "sk_test_simulated", APIBase: url, Timeout: 5 * time.Second, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	since := sim.Now()
	sim.Advance(time.Hour - time.Minute)
	// Eleven in one second, one of them ISK, and one made elsewhere.
	for i := range 11 {
		currency := "USD"
		if i == 5 {
			currency = "ISK"
		}
		if _, err := c.Charge(context.Background(), simCharge(sim, fmt.Sprintf("pay_%02d", i), 700, currency, "pm_card_visa")); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := simCharge(sim, "pay_elsewhere", 900, "USD", "pm_card_visa")
	elsewhere.IdempotencyKey = ""
	_, _ = c.Charge(context.Background(), elsewhere) // refused by the adapter: no key
	var all []operation.LedgerEntry
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("the ledger does not end")
		}
		page, next, err := c.LedgerCharges(context.Background(), since, cursor)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 11 {
		t.Fatalf("%d entries, want the 11 made under keys: %+v", len(all), all)
	}
	seen := map[string]bool{}
	for _, e := range all {
		if seen[e.ID] || e.Amount != 700 || e.Reference == "" {
			t.Errorf("entry %+v (seen %t), want each once, 700 in ISO minor units", e, seen[e.ID])
		}
		seen[e.ID] = true
	}
	for _, pi := range sim.PaymentIntents() {
		if pi.Currency == "isk" && pi.Amount != 70000 {
			t.Errorf("700 ISK sent as %d", pi.Amount)
		}
	}
}
