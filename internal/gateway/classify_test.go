package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/payments"
)

// TestClassify checks how answers the fake processor never gives, but a real
// one or a proxy in front of it might, are classified.
func TestClassify(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		status      int
		body        string
		wantUnknown bool
		wantOK      bool // a definite charge outcome, no error
	}{
		{"OK", 200, `{"id":"ch_1","object":"charge","status":"succeeded"}`, false, true},
		{"Declined", 402, `{"error":{"type":"card_error","code":"card_declined","message":"no","charge":"ch_2"}}`, false, true},
		{"ErrUnreadable200", 200, `<html>`, true, false},
		{"ErrUnreadable402", 402, `{}`, true, false},
		{"ErrBadGateway", 502, `<html>bad gateway</html>`, true, false},
		{"ErrUnavailable", 503, `{"error":{"type":"api_error","code":"down","message":"down"}}`, true, false},
		{"ErrInUse", 409, `{"error":{"type":"idempotency_error","code":"in_use","message":"busy"}}`, true, false},
		{"ErrRateLimited", 429, `{"error":{"type":"rate_limit_error","code":"rate_limit","message":"slow down"}}`, true, false},
		{"ErrBadRequest", 400, `{"error":{"type":"invalid_request_error","code":"parameter_invalid","message":"bad"}}`, false, false},
		{"ErrUnauthorized", 401, `unauthorized`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Idempotency-Key") != "k" {
					t.Errorf("Idempotency-Key = %q", r.Header.Get("Idempotency-Key"))
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)

			got, err := gateway.New(srv.URL, 5*time.Second).Charge(context.Background(), payments.ChargeRequest{
				IdempotencyKey: "k", Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa",
			})
			if tt.wantOK {
				if err != nil || got.ID == "" {
					t.Fatalf("charge = %+v, %v", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, charge %+v", got)
			}
			if errors.Is(err, payments.ErrProcessorUnknown) != tt.wantUnknown {
				t.Errorf("err = %v; unknown = %v, want %v", err, !tt.wantUnknown, tt.wantUnknown)
			}
		})
	}
}

func TestLookupClassify(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	client := gateway.New(srv.URL, 5*time.Second)
	ctx := context.Background()

	if _, err := client.ChargesByIdempotencyKey(ctx, "k"); !errors.Is(err, payments.ErrProcessorUnknown) {
		t.Errorf("ChargesByIdempotencyKey: %v", err)
	}
	if _, err := client.ChargesByPayment(ctx, "pay_1"); !errors.Is(err, payments.ErrProcessorUnknown) {
		t.Errorf("ChargesByPayment: %v", err)
	}
	if _, err := client.GetCharge(ctx, "ch_1"); !errors.Is(err, payments.ErrProcessorUnknown) {
		t.Errorf("GetCharge: %v", err)
	}
}
