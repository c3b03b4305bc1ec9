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
	refund := refunds.Request{IdempotencyKey: refundKey, ChargeID: "pi_mock", Amount: 500, Currency: "USD", CreatedAt: time.Now()}
	refunded, err := c.Refund(ctx, refund)
	if err != nil || !strings.HasPrefix(refunded.ID, "re_") || !refunded.Succeeded {
		t.Errorf("Refund = %+v, %v; want a success of a re_", refunded, err)
	}

	// The mock keeps nothing: its search and its lists answer the fixture,
	// whose metadata is empty, no object made under the key. None found.
	charge := payments.ChargeRequest{IdempotencyKey: chargeKey, CreatedAt: time.Now()}
	if out, found, err := c.FindCharge(ctx, charge); err != nil || found {
		t.Errorf("FindCharge = %+v, %v, %v; want none", out, found, err)
	}
	if out, found, err := c.FindRefund(ctx, refund); err != nil || found {
		t.Errorf("FindRefund = %+v, %v, %v; want none", out, found, err)
	}

	// The fence, a Customer, is made (the mock refuses no key): the key is
	// closed with nothing made under it.
	if out, made, err := c.CloseCharge(ctx, charge); err != nil || made {
		t.Errorf("CloseCharge = %+v, %v, %v; want nothing made", out, made, err)
	}
	if out, made, err := c.CloseRefund(ctx, refund); err != nil || made {
		t.Errorf("CloseRefund = %+v, %v, %v; want nothing made", out, made, err)
	}

	// Each list is one page of the fixture, the last page: the first page,
	// and a later one asked with ending_before, have no next. The fixture
	// names no downstream key: made elsewhere, it is no entry.
	since := time.Now().Add(-time.Hour)
	for name, ledger := range map[string]func(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error){
		"LedgerCharges": c.LedgerCharges, "LedgerRefunds": c.LedgerRefunds,
	} {
		for _, cursor := range []string{"", "obj_cursor"} {
			page, next, err := ledger(ctx, since, cursor)
			if err != nil || next != "" || len(page) != 0 {
				t.Errorf("%s(%q) = %+v, %q, %v; want no entry", name, cursor, page, next, err)
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
		"POST /v1/refunds", "GET /v1/refunds", "POST /v1/customers",
	} {
		if len(answered[route]) == 0 {
			t.Errorf("no %s was made", route)
		}
	}
	for route, statuses := range answered {
		for _, s := range statuses {
			if s != http.StatusOK {
				t.Errorf("%s answered %d: the mock refused a request", route, s)
			}
		}
	}
	if t.Failed() {
		t.Logf("answers: %v", answered)
	}
}
