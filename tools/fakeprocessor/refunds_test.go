package fakeprocessor_test

import (
	"net/http"
	"testing"

	"github.com/example/payments/tools/fakeprocessor"
)

// charge creates a charge of 1000 and returns its id.
func (e *env) charge(key, method string) string {
	e.t.Helper()
	resp := e.post("/v1/charges", key, `{"amount":1000,"currency":"USD","payment_method":"`+method+`"}`)
	switch resp.status {
	case http.StatusOK:
		return decode[fakeprocessor.Charge](e.t, resp).ID
	case http.StatusPaymentRequired:
		return decodeError(e.t, resp).Charge
	}
	e.t.Fatalf("charge: %d %s", resp.status, resp.body)
	return ""
}

// wantRefunded fails t unless the amount_refunded of the charge chargeID is
// amount.
func (e *env) wantRefunded(t *testing.T, chargeID string, amount int64) {
	t.Helper()
	if got := decode[fakeprocessor.Charge](t, e.get("/v1/charges/"+chargeID)).AmountRefunded; got != amount {
		t.Errorf("amount_refunded = %d, want %d", got, amount)
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	t.Run("PartialThenRest", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("rf-partial", "pm_card_visa")
		first := e.postOK(t, "/v1/refunds", "rf-partial-1", `{"charge":"`+ch+`","amount":300}`)
		r := decode[fakeprocessor.Refund](t, first)
		if r.Object != "refund" || r.Charge != ch || r.Amount != 300 || r.Status != "succeeded" || r.IdempotencyKey != "rf-partial-1" ||
			len(r.ID) < 4 || r.ID[:3] != "re_" || r.CreatedAt.IsZero() {
			t.Errorf("refund = %s", first.body)
		}
		rest := e.post("/v1/refunds", "rf-partial-2", `{"charge":"`+ch+`"}`)
		if got := decode[fakeprocessor.Refund](t, rest).Amount; rest.status != http.StatusOK || got != 700 {
			t.Fatalf("rest: %d %s", rest.status, rest.body)
		}
		e.wantRefunded(t, ch, 1000)
		again := e.post("/v1/refunds", "rf-partial-3", `{"charge":"`+ch+`"}`)
		wantError(t, again, http.StatusBadRequest, "invalid_request_error", "charge_already_refunded")
	})
	t.Run("Replay", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("rf-replay", "pm_card_visa")
		first := e.postOK(t, "/v1/refunds", "rf-replay-1", `{"charge":"`+ch+`","amount":100}`)
		wantReplayOf(t, e.post("/v1/refunds", "rf-replay-1", `{"amount":100,"charge":"`+ch+`"}`), first)
		e.wantRefunded(t, ch, 100)
		if n := e.count(`SELECT count(*) FROM processor.refunds WHERE charge_id = $1`, ch); n != 1 {
			t.Errorf("refund rows = %d, want 1", n)
		}
	})

	errTests := []struct {
		name       string
		method     string // of the charge; "" for an unknown charge
		amount     string
		wantStatus int
		wantCode   string
	}{
		{"ErrOverRefund", "pm_card_visa", `,"amount":1001`, http.StatusBadRequest, "amount_too_large"},
		{"ErrDeclinedCharge", "pm_card_declined", ``, http.StatusBadRequest, "charge_not_refundable"},
		{"ErrUnknownCharge", "", ``, http.StatusNotFound, "resource_missing"},
		{"ErrAmountZero", "pm_card_visa", `,"amount":0`, http.StatusBadRequest, "parameter_invalid"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := "ch_unknown"
			if tt.method != "" {
				ch = e.charge("rf-"+tt.name, tt.method)
			}
			resp := e.post("/v1/refunds", "rf-"+tt.name+"-refund", `{"charge":"`+ch+`"`+tt.amount+`}`)
			wantError(t, resp, tt.wantStatus, "invalid_request_error", tt.wantCode)
			if n := e.count(`SELECT count(*) FROM processor.refunds WHERE charge_id = $1`, ch); n != 0 {
				t.Errorf("refund rows = %d, want 0", n)
			}
			if tt.method != "" {
				e.wantRefunded(t, ch, 0)
			}
		})
	}
}
