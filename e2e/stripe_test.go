package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/example/payments/tools/stripemock"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestStripeMockStack: the stack started against Stripe's own mock, as
// README's Stripe section starts it (PROCESSOR=stripe, STRIPE_API_BASE,
// STRIPE_API_KEY, STRIPE_WEBHOOK_SECRET). A payment reaches the mock as a
// PaymentIntent create it accepts, under the payment's downstream key, and
// its answer (the mock's fixture: requires_payment_method, its attempt
// failed) is a decline, 402 payment_failed; a refund and a ledger pass reach
// it too, and are accepted; the API takes Stripe's signed webhooks and
// refuses a forged one.
func TestStripeMockStack(t *testing.T) {
	t.Parallel()
	rec := stripemock.NewRecorder(t, stripemock.Start(t))
	const secret = "whsec_e2e_stripe"
	db := testdb.New(t).URL
	env := []string{"DATABASE_URL=" + db}
	run(t, "api", env, "migrate")
	run(t, "api", append(env, "APP_ENV=development"), "seed")
	s := newStack(t, db)
	// At the defaults: the worker starts with Stripe's 24 hours of keys.
	s.startWorker("PROCESSOR=stripe", "STRIPE_API_BASE="+rec.URL, "STRIPE_API_KEY="+stripemock.APIKey)
	s.startAPI("PROCESSOR=stripe", "STRIPE_WEBHOOK_SECRET="+secret)

	status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "stripe-pay", crashBody, "Prefer", "wait=20")
	var declined struct {
		Code    string
		Payment struct{ ID, Status string }
	}
	if err := json.Unmarshal(body, &declined); err != nil || status != http.StatusPaymentRequired ||
		declined.Code != "payment_failed" || declined.Payment.Status != "failed" {
		t.Fatalf("payment: %d %s; want the fixture's failed attempt, 402 payment_failed", status, body)
	}
	pay := declined.Payment.ID
	accepted(t, rec, "POST /v1/payment_intents", "charge_"+pay)

	// The mock keeps nothing, so no payment of its succeeds: take it as
	// succeeded, as a refund needs, and refund it.
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pi string
	if err := conn.QueryRow(context.Background(), `UPDATE payments SET status = 'succeeded', failure_code = NULL, failure_message = NULL
WHERE id = $1 RETURNING processor_charge_id`, pay).Scan(&pi); err != nil || !strings.HasPrefix(pi, "pi_") {
		t.Fatalf("the payment's PaymentIntent %q: %v", pi, err)
	}
	status, _, body = do(t, http.MethodPost, s.apiURL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", "stripe-refund", `{"amount": 500}`, "Prefer", "wait=20")
	var refund struct{ ID, Status string }
	if err := json.Unmarshal(body, &refund); err != nil || status != http.StatusCreated || refund.Status != "succeeded" {
		t.Fatalf("refund: %d %s; want the fixture's success, 201", status, body)
	}
	accepted(t, rec, "POST /v1/refunds", "refund_"+refund.ID)

	// The ledger comparison, every RECONCILE_INTERVAL, lists both.
	testwait.Poll(t, time.Now().Add(20*time.Second), 100*time.Millisecond, func() error {
		for _, route := range []string{"GET /v1/payment_intents", "GET /v1/refunds"} {
			if !slices.ContainsFunc(rec.Calls(), func(c stripemock.Call) bool { return c.Route == route }) {
				return fmt.Errorf("no %s yet", route)
			}
		}
		return nil
	})
	for _, c := range rec.Calls() {
		if c.Status != http.StatusOK {
			t.Errorf("the mock refused %s: %d", c.Route, c.Status)
		}
	}

	// Stripe's webhook, signed with the endpoint's secret, is taken (about a
	// PaymentIntent of no operation here: recorded for review); signed with
	// another secret, it is refused and recorded nowhere.
	event := []byte(`{"id": "evt_stripe_e2e", "object": "event", "type": "payment_intent.succeeded", "created": 1700000000,
"data": {"object": {"id": "pi_elsewhere", "object": "payment_intent", "status": "succeeded", "amount": 700, "currency": "usd",
"metadata": {"downstream_key": "charge_pay_000000000000000000000000"}}}}`)
	for _, tt := range []struct {
		name, secret, result string
		status               int
	}{
		{"Forged", "whsec_forged", "", http.StatusBadRequest},
		{"Signed", secret, "unknown_operation", http.StatusOK},
	} {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: tt.secret, Timestamp: time.Now()})
		status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/processor/webhooks", "", "", string(event), "Stripe-Signature", signed.Header)
		if status != tt.status || !strings.Contains(string(body), tt.result) {
			t.Errorf("%s webhook: %d %s, want %d %s", tt.name, status, body, tt.status, tt.result)
		}
	}
}

// accepted fails t unless the mock answered 200 to a request to route under
// the Idempotency-Key key.
func accepted(t *testing.T, rec *stripemock.Recorder, route, key string) {
	t.Helper()
	if !slices.Contains(rec.Calls(), stripemock.Call{Route: route, IdempotencyKey: key, Status: http.StatusOK}) {
		t.Fatalf("no %s under Idempotency-Key %s accepted by the mock: %+v", route, key, rec.Calls())
	}
}
