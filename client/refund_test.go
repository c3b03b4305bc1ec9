package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// refundJSON is a refund as the server encodes it.
func refundJSON(status string) string {
	failureCode := "null"
	if status == StatusFailed {
		failureCode = `"charge_already_refunded"`
	}
	return fmt.Sprintf(`{"id":"re_123","object":"refund","payment_id":"pay_123","amount":500,"reason":"requested_by_customer",`+
		`"status":%q,"failure_code":%s,"processor_refund_id":null,`+
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`, status, failureCode)
}

func TestCreateRefund(t *testing.T) {
	t.Parallel()
	amount := int64(500)

	tests := []struct {
		name         string
		params       CreateRefundParams
		steps        []step
		wantBody     string
		wantStatus   string
		wantCode     string
		wantRequests int
	}{
		{
			name:     "OK",
			params:   CreateRefundParams{Amount: &amount, Reason: "requested_by_customer"},
			steps:    []step{respond(http.StatusCreated, refundJSON(StatusSucceeded))},
			wantBody: `{"amount":500,"reason":"requested_by_customer"}`, wantStatus: StatusSucceeded, wantRequests: 1,
		},
		{
			name: "KeyInUseThenCreated",
			steps: []step{
				respond(http.StatusConflict, problemJSON(http.StatusConflict, "idempotency_key_in_use", "held"), "Retry-After", "1"),
				respond(http.StatusCreated, refundJSON(StatusSucceeded)),
			},
			wantBody: `{}`, wantStatus: StatusSucceeded, wantRequests: 2,
		},
		{
			name:     "ErrRefundFailed",
			steps:    []step{respond(http.StatusPaymentRequired, problemJSON(http.StatusPaymentRequired, "charge_already_refunded", "failed", `"refund":`+refundJSON(StatusFailed)))},
			wantBody: `{}`, wantStatus: StatusFailed, wantCode: "charge_already_refunded", wantRequests: 1,
		},
		{
			name:     "ErrPaymentNotRefundable",
			steps:    []step{respond(http.StatusConflict, problemJSON(http.StatusConflict, "payment_not_refundable", "the payment failed"))},
			wantBody: `{}`, wantCode: "payment_not_refundable", wantRequests: 1,
		},
		{
			// A server without refunds yet answers its router's 404.
			name:     "ErrNotImplementedYet",
			steps:    []step{respond(http.StatusNotFound, problemJSON(http.StatusNotFound, "not_found", "no such endpoint"))},
			wantBody: `{}`, wantCode: "not_found", wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.steps...)
			c, _ := newTestClient(t, f)

			re, resp, err := c.CreateRefund(context.Background(), "", "pay_123", tt.params)

			if tt.wantCode == "" && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.wantCode != "" {
				if apiErr, ok := errors.AsType[*Error](err); !ok || apiErr.Code != tt.wantCode {
					t.Errorf("err = %v, want *Error %s", err, tt.wantCode)
				}
			}
			if tt.wantStatus == "" && re != nil || tt.wantStatus != "" && (re == nil || re.Status != tt.wantStatus) {
				t.Errorf("refund = %+v, want status %q", re, tt.wantStatus)
			}
			reqs := f.requests()
			checkAttempts(t, reqs, resp, "/v1/payments/pay_123/refunds", "", tt.wantRequests)
			if reqs[0].Body != tt.wantBody {
				t.Errorf("body = %s, want %s", reqs[0].Body, tt.wantBody)
			}
		})
	}
}

func TestCreateRefundEmptyPaymentID(t *testing.T) {
	t.Parallel()
	c := New("http://127.0.0.1:1", "sk")
	_, resp, err := c.CreateRefund(context.Background(), "k", "", CreateRefundParams{})
	if err == nil || resp == nil || resp.IdempotencyKey != "k" {
		t.Errorf("got resp %+v, err %v; want an error and the key", resp, err)
	}
}

func TestGetRefund(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, respond(http.StatusOK, refundJSON(StatusSucceeded)))
	c, _ := newTestClient(t, f)

	re, err := c.GetRefund(context.Background(), "re_123")
	if err != nil {
		t.Fatalf("GetRefund: %v", err)
	}
	if re.ID != "re_123" || re.PaymentID != "pay_123" || re.Amount != 500 || re.Reason == nil || *re.Reason != "requested_by_customer" {
		t.Errorf("refund = %+v", re)
	}
	if r := f.requests()[0]; r.Method != http.MethodGet || r.Path != "/v1/refunds/re_123" {
		t.Errorf("request = %s %s, want GET /v1/refunds/re_123", r.Method, r.Path)
	}
	if _, err := c.GetRefund(context.Background(), ""); err == nil {
		t.Error("GetRefund(\"\") = nil error, want one")
	}
}
