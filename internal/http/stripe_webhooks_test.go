package http_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/stripesim"
)

// stripeEvent is Stripe's event evtID of type typ about PaymentIntent pi in
// status, made under the downstream key of payment payID, for amount cents
// in USD, with extra members of the PaymentIntent.
func stripeEvent(evtID, typ, pi, status, payID string, amount int64, extra string) string {
	return fmt.Sprintf(`{"id": %q, "object": "event", "type": %q, "created": 1700000000, "livemode": false,
"data": {"object": {"id": %q, "object": "payment_intent", "status": %q, "amount": %d, "currency": "usd",
"metadata": {"downstream_key": "charge_%s", "payment_id": %q}%s}}}`, evtID, typ, pi, status, amount, payID, payID, extra)
}

// stripeSigned is the Stripe-Signature header of body signed with secret at.
func stripeSigned(body, secret string, at time.Time) []string {
	p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: at})
	return []string{"Stripe-Signature", p.Header}
}

// TestStripeWebhooks: with PROCESSOR=stripe, the API takes Stripe's
// webhooks signed as Stripe signs them, and the settling path is the one
// every processor's takes: a payment_intent.succeeded settles its payment,
// a payment_intent.payment_failed declines one with its decline code. A
// forged, tampered or stale delivery is refused and recorded nowhere; a
// PaymentIntent still processing, or one this service did not make, settles
// nothing and is answered 200, ignored.
func TestStripeWebhooks(t *testing.T) {
	t.Parallel()
	const secret, rotated = "whsec_stripe_current", "whsec_stripe_previous"
	// The worker is built, never started: the events are settled here, and
	// no job calls Stripe (STRIPE_API_BASE is never reached).
	s := stacktest.New(t, stacktest.Options{Stripe: &stacktest.Stripe{APIBase: "http://127.0.0.1:9", WebhookSecret: secret + "," + rotated}})
	payment := func(key string) payments.Payment {
		res := s.Pay(acme, key, `{"amount":4200,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "respond-async")
		if res.Status != http.StatusAccepted {
			t.Fatalf("payment: %d %s", res.Status, res.Body)
		}
		return decodePayment(t, res.Body)
	}
	paid, declined := payment("stripe-paid"), payment("stripe-declined")
	now := time.Now()
	recorded := func() int { return s.Count(`SELECT count(*) FROM processor_events`) }

	succeeded := stripeEvent("evt_paid", "payment_intent.succeeded", "pi_paid", "succeeded", paid.ID, 4200, "")
	for _, c := range []struct {
		name    string
		body    string
		headers []string
	}{
		{"Forged", succeeded, stripeSigned(succeeded, "whsec_forged", now)},
		{"Tampered", strings.Replace(succeeded, "4200", "42", 1), stripeSigned(succeeded, secret, now)},
		{"Stale", succeeded, stripeSigned(succeeded, secret, now.Add(-10*time.Minute))},
		{"Unsigned", succeeded, nil},
		// A Standard Webhooks signature, the fake processor's, is not Stripe's.
		{"NotStripes", succeeded, sign(t, s.WebhookSecret, "evt_paid", now, succeeded)},
	} {
		if res := deliver(s, c.body, c.headers); res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), "webhook_signature_invalid") {
			t.Errorf("%s: %d %s, want 400 webhook_signature_invalid", c.name, res.Status, res.Body)
		}
	}
	if n := recorded(); n != 0 {
		t.Fatalf("%d events recorded from refused deliveries", n)
	}

	processing := stripeEvent("evt_processing", "payment_intent.processing", "pi_paid", "processing", paid.ID, 4200, "")
	// A PaymentIntent made elsewhere (Checkout, the Dashboard): no key in
	// its metadata. A refusal would have Stripe send it again for days.
	elsewhere := `{"id": "evt_elsewhere", "object": "event", "type": "payment_intent.succeeded", "created": 1700000000,
"data": {"object": {"id": "pi_checkout", "object": "payment_intent", "status": "succeeded", "amount": 900, "currency": "usd",
"metadata": {"checkout": "cs_1"}}}}`
	failed := stripeEvent("evt_declined", "payment_intent.payment_failed", "pi_declined", "requires_payment_method", declined.ID, 4200,
		`, "last_payment_error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds", "message": "Your card has insufficient funds."}`)
	for _, c := range []struct {
		name, body, secret, result string
	}{
		{"Processing", processing, secret, "ignored"},
		{"MadeElsewhere", elsewhere, secret, "ignored"},
		{"Succeeded", succeeded, secret, "accepted"},
		{"Duplicate", succeeded, secret, "duplicate"},
		{"DeclinedRotated", failed, rotated, "accepted"},
	} {
		res := deliver(s, c.body, stripeSigned(c.body, c.secret, now))
		if res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"result":"`+c.result+`"`) {
			t.Errorf("%s: %d %s, want %s", c.name, res.Status, res.Body, c.result)
		}
	}
	for _, id := range []string{"evt_paid", "evt_declined"} {
		if result, err := s.Ops.SettleFromEvent(t.Context(), id); err != nil || result != operation.EventSettled {
			t.Fatalf("settle %s: %s, %v", id, result, err)
		}
	}
	if n := s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND status = 'succeeded' AND processor_charge_id = 'pi_paid' AND settled_by = 'webhook'`, paid.ID); n != 1 {
		t.Errorf("the succeeded PaymentIntent's payment is not settled by its webhook")
	}
	if n := s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND status = 'failed' AND failure_code = 'insufficient_funds' AND settled_by = 'webhook'`, declined.ID); n != 1 {
		t.Errorf("the declined PaymentIntent's payment is not failed insufficient_funds by its webhook")
	}
	wantMetrics(t, s.APIMetrics(),
		`payments_processor_webhooks_received_total{result="invalid_signature"} 4`,
		`payments_processor_webhooks_received_total{result="stale"} 1`,
		`payments_processor_webhooks_received_total{result="ignored"} 2`,
		`payments_processor_webhooks_received_total{result="accepted"} 2`)
}

// TestStripeAmounts: with PROCESSOR=stripe, the API refuses before a key
// is spent an amount Stripe would refuse in its currency, a 400 naming
// amount, and takes the smallest it would take; the key stays free for the
// corrected request.
func TestStripeAmounts(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{Stripe: &stacktest.Stripe{APIBase: "http://127.0.0.1:9", WebhookSecret: "whsec_amounts"}})
	for _, c := range []struct {
		amount   int64
		currency string
		refused  string // what the refusal says, "" for taken
	}{
		{49, "USD", "must be at least 50 in USD"},
		{50, "USD", ""},
		{29, "GBP", "must be at least 30 in GBP"},
		{49, "JPY", "must be at least 50 in JPY"},
		{1499, "CZK", "must be at least 1500 in CZK"},
		{1005, "KWD", "must be a multiple of 10 in KWD"},
		{1010, "BHD", ""},
		{150, "MGA", "must be a multiple of 100 in MGA"},
		{5, "ISK", ""},
	} {
		key := fmt.Sprintf("amount-%d-%s", c.amount, c.currency)
		body := fmt.Sprintf(`{"amount":%d,"currency":%q,"payment_method":"pm_card_visa"}`, c.amount, c.currency)
		res := s.Pay(acme, key, body, "Prefer", "respond-async")
		switch {
		case c.refused == "" && res.Status != http.StatusAccepted:
			t.Errorf("%d %s: %d %s, want taken", c.amount, c.currency, res.Status, res.Body)
		case c.refused != "" && (res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"amount"`) ||
			!strings.Contains(string(res.Body), c.refused)):
			t.Errorf("%d %s: %d %s, want a 400 naming amount: %s", c.amount, c.currency, res.Status, res.Body, c.refused)
		case c.refused != "":
			if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE key = $1`, key); n != 0 {
				t.Errorf("%d %s: the refusal spent the key", c.amount, c.currency)
			}
		}
	}
}

// TestStripeAuthenticationRequired: with PROCESSOR=stripe, against the
// Stripe simulator, a card that needs 3-D Secure ends in a final answer
// within the client's wait: a 402 declining it, authentication_required,
// never a payment left processing.
func TestStripeAuthenticationRequired(t *testing.T) {
	t.Parallel()
	sim, url := stripesim.Serve(t, stripesim.Options{})
	s := stacktest.New(t, stacktest.Options{Stripe: &stacktest.Stripe{APIBase: url, WebhookSecret: "whsec_sca"}})
	s.StartWorker()
	res := s.Pay(acme, "sca-card", `{"amount":2500,"currency":"EUR","payment_method":"pm_card_authenticationRequired"}`, "Prefer", "wait=10")
	if res.Status != http.StatusPaymentRequired || !strings.Contains(string(res.Body), `"failure_code":"authentication_required"`) {
		t.Fatalf("payment: %d %s, want 402 authentication_required", res.Status, res.Body)
	}
	if pis := sim.PaymentIntents(); len(pis) != 1 || pis[0].Status != stripesim.StatusRequiresPaymentMethod {
		t.Fatalf("at Stripe: %+v", pis)
	}
}
