package stripe_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/stripemock"
)

// TestStripeMock: every call the adapter makes is one Stripe's API accepts
// (stripe-mock validates each against Stripe's OpenAPI document, and
// answers a 400 to one it does not), and each answer, the mock's fixture,
// parses to what the package doc says it means.
func TestStripeMock(t *testing.T) {
	t.Parallel()
	base := stripemock.Start(t)
	rec := stripemock.NewRecorder(t, base)
	c, err := stripe.New(stripe.Config{APIKey: stripemock.APIKey, APIBase: rec.URL, Timeout: 10 * time.Second, PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const chargeKey, refundKey = "charge_pay_mock", "refund_re_mock"

	// The fixture PaymentIntent is requires_payment_method with a
	// last_payment_error naming neither code nor decline_code: the attempt
	// failed, a decline of it, "payment_failed".
	charged, err := c.Charge(ctx, payments.ChargeRequest{IdempotencyKey: chargeKey, PaymentID: "pay_mock", Amount: 1500,
		Currency: "USD", PaymentMethod: "pm_card_visa", Description: "stripe-mock"})
	if err != nil || !strings.HasPrefix(charged.ID, "pi_") || charged.Succeeded || charged.FailureCode != "payment_failed" {
		t.Errorf("Charge = %+v, %v; want a decline of a pi_, payment_failed", charged, err)
	}

	// The fixture Refund succeeded.
	refunded, err := c.Refund(ctx, refunds.Request{IdempotencyKey: refundKey, ChargeID: "pi_mock", Amount: 500})
	if err != nil || !strings.HasPrefix(refunded.ID, "re_") || !refunded.Succeeded {
		t.Errorf("Refund = %+v, %v; want a success of a re_", refunded, err)
	}

	// The mock keeps nothing: its search and its list answer the fixture,
	// whose metadata is empty, no object made under the key. None found.
	if out, found, err := c.FindCharge(ctx, payments.ChargeRequest{IdempotencyKey: chargeKey}); err != nil || found {
		t.Errorf("FindCharge = %+v, %v, %v; want none", out, found, err)
	}
	if out, found, err := c.FindRefund(ctx, refunds.Request{IdempotencyKey: refundKey}); err != nil || found {
		t.Errorf("FindRefund = %+v, %v, %v; want none", out, found, err)
	}

	// The fence is made (the mock refuses no key) and canceled: the key is
	// closed with nothing made under it.
	if out, made, err := c.CloseCharge(ctx, payments.ChargeRequest{IdempotencyKey: chargeKey}); err != nil || made {
		t.Errorf("CloseCharge = %+v, %v, %v; want nothing made", out, made, err)
	}
	if out, made, err := c.CloseRefund(ctx, refunds.Request{IdempotencyKey: refundKey}); err != nil || made {
		t.Errorf("CloseRefund = %+v, %v, %v; want nothing made", out, made, err)
	}

	// Each list is one page of the fixture, the last page: the first page,
	// and a later one asked with ending_before, have no next.
	since := time.Now().Add(-time.Hour)
	for name, ledger := range map[string]func(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error){
		"LedgerCharges": c.LedgerCharges, "LedgerRefunds": c.LedgerRefunds,
	} {
		for _, cursor := range []string{"", "obj_cursor"} {
			page, next, err := ledger(ctx, since, cursor)
			if err != nil || next != "" || len(page) != 1 || page[0].ID == "" || page[0].Amount == 0 ||
				page[0].Currency != "USD" || page[0].CreatedAt.IsZero() {
				t.Errorf("%s(%q) = %+v, %q, %v; want the fixture", name, cursor, page, next, err)
			}
		}
	}

	// The check below can fail: the mock refuses a request Stripe's API
	// does not accept (here, a parameter it does not know).
	req, err := http.NewRequest(http.MethodPost, base+"/v1/payment_intents",
		strings.NewReader(url.Values{"amount": {"1500"}, "currency": {"usd"}, "unknown": {"1"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk_test_123")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	refused, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = refused.Body.Close()
	if refused.StatusCode != http.StatusBadRequest {
		t.Errorf("the mock answered %d to an unknown parameter, want 400", refused.StatusCode)
	}

	answered := map[string][]int{}
	for _, c := range rec.Calls() {
		answered[c.Route] = append(answered[c.Route], c.Status)
	}
	for _, route := range []string{
		"POST /v1/payment_intents", "GET /v1/payment_intents/search", "GET /v1/payment_intents",
		"POST /v1/refunds", "GET /v1/refunds",
	} {
		if len(answered[route]) == 0 {
			t.Errorf("no %s was made", route)
		}
	}
	cancels := 0
	for route, statuses := range answered {
		if strings.HasSuffix(route, "/cancel") {
			cancels += len(statuses)
		}
		for _, s := range statuses {
			if s != http.StatusOK {
				t.Errorf("%s answered %d: the mock refused a request", route, s)
			}
		}
	}
	if cancels != 2 {
		t.Errorf("%d cancels, want the two fences'", cancels)
	}
	if t.Failed() {
		t.Logf("answers: %v", answered)
	}
}
