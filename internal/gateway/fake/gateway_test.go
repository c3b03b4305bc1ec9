package fake_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startProcessor runs the fake processor with cfg on a fresh database and
// returns its URL.
func startProcessor(t *testing.T, cfg fakeprocessor.Config) string {
	t.Helper()
	db := testdb.New(t)
	proc, err := fakeprocessor.New(db.Pool, slog.New(slog.NewTextHandler(t.Output(), nil)), cfg)
	if err != nil {
		t.Fatalf("new processor: %v", err)
	}
	srv := httptest.NewServer(proc)
	t.Cleanup(srv.Close)
	return srv.URL
}

// newClient returns a client of a fake processor on a fresh database.
func newClient(t *testing.T) *fake.Client {
	t.Helper()
	return chaosClient(t, fakeprocessor.Chaos{})
}

// chaosClient returns a client of a fake processor injecting chaos, on a
// fresh database.
func chaosClient(t *testing.T, chaos fakeprocessor.Chaos) *fake.Client {
	t.Helper()
	return fake.New(startProcessor(t, fakeprocessor.Config{Chaos: chaos}), 5*time.Second)
}

// chargeReq is a charge request of 1500 USD with the given key and method.
func chargeReq(key, method string) payments.ChargeRequest {
	return payments.ChargeRequest{
		IdempotencyKey: key,
		PaymentID:      "pay_" + key,
		Amount:         1500,
		Currency:       "USD",
		PaymentMethod:  method,
		Description:    "gateway test",
	}
}

// mustCharge makes the charge chargeReq(key, method) and fails t unless the
// processor answers definitely.
func mustCharge(t *testing.T, client *fake.Client, key, method string) operation.Outcome {
	t.Helper()
	charge, err := client.Charge(context.Background(), chargeReq(key, method))
	if err != nil {
		t.Fatal(err)
	}
	return charge
}

// mustRefund refunds amount of the charge chargeID under key and fails t
// unless the processor answers definitely.
func mustRefund(t *testing.T, client *fake.Client, key, chargeID string, amount int64) operation.Outcome {
	t.Helper()
	refund, err := client.Refund(context.Background(), refunds.Request{IdempotencyKey: key, ChargeID: chargeID, Amount: amount})
	if err != nil {
		t.Fatal(err)
	}
	return refund
}

func TestCharge(t *testing.T) {
	t.Parallel()
	client := newClient(t)

	tests := []struct {
		name        string
		method      string
		wantOK      bool
		wantFailure string
	}{
		{"Visa", "pm_card_visa", true, ""},
		{"Mastercard", "pm_card_mastercard", true, ""},
		{"Declined", "pm_card_declined", false, "card_declined"},
		{"InsufficientFunds", "pm_card_insufficient_funds", false, "insufficient_funds"},
		{"InvalidMethod", "pm_nope", false, "invalid_payment_method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			req := chargeReq("charge-"+tt.name, tt.method)
			got, err := client.Charge(ctx, req)
			if err != nil {
				t.Fatalf("a definite outcome is not an error: %v", err)
			}
			if got.Succeeded != tt.wantOK || got.FailureCode != tt.wantFailure || got.ID == "" {
				t.Fatalf("charge = %+v", got)
			}
			if !tt.wantOK && got.FailureMessage == "" {
				t.Errorf("decline without a message: %+v", got)
			}

			// A retry with the same key is the same charge.
			again, err := client.Charge(ctx, req)
			if err != nil || again != got {
				t.Errorf("retry = %+v, %v; want %+v", again, err, got)
			}
			obj, err := client.GetCharge(ctx, got.ID)
			if err != nil {
				t.Fatalf("get charge: %v", err)
			}
			if obj.IdempotencyKey != req.IdempotencyKey || obj.PaymentID != req.PaymentID || obj.Amount != req.Amount ||
				obj.Succeeded() != tt.wantOK || obj.FailureCode != tt.wantFailure {
				t.Errorf("charge object = %+v", obj)
			}
		})
	}
}

func TestChargeErrors(t *testing.T) {
	t.Parallel()
	url := startProcessor(t, fakeprocessor.Config{})
	client := fake.New(url, 5*time.Second)
	ctx := context.Background()

	t.Run("ProcessingErrorIsUnknown", func(t *testing.T) {
		t.Parallel()
		_, err := client.Charge(ctx, chargeReq("err-processing", "pm_card_processing_error"))
		if !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("err = %v, want ErrProcessorUnknown", err)
		}
		var apiErr *fake.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || apiErr.Type != "api_error" {
			t.Errorf("api error = %+v", apiErr)
		}
	})
	t.Run("KeyReusedIsDefinite", func(t *testing.T) {
		t.Parallel()
		req := chargeReq("err-reused", "pm_card_visa")
		if _, err := client.Charge(ctx, req); err != nil {
			t.Fatal(err)
		}
		req.Amount++
		got, err := client.Charge(ctx, req)
		if err != nil || got.ID != "" || got.Succeeded || got.FailureCode != "idempotency_key_reused" || got.FailureMessage == "" {
			t.Errorf("charge = %+v, %v; want a definite refusal", got, err)
		}
	})
	t.Run("ConnectionRefusedIsUnknown", func(t *testing.T) {
		t.Parallel()
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		_, err := fake.New(closed.URL, time.Second).Charge(ctx, chargeReq("err-refused", "pm_card_visa"))
		if !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Errorf("err = %v, want ErrProcessorUnknown", err)
		}
	})
}

func TestChargeTimeout(t *testing.T) {
	t.Parallel()
	url := startProcessor(t, fakeprocessor.Config{TimeoutHang: time.Hour})
	ctx := context.Background()
	req := chargeReq("timeout", "pm_card_timeout")

	_, err := fake.New(url, 300*time.Millisecond).Charge(ctx, req)
	if !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Fatalf("err = %v, want ErrProcessorUnknown", err)
	}

	// The caller could not know, but the processor charged exactly once.
	client := fake.New(url, 5*time.Second)
	var list []fake.ChargeObject
	testwait.For(t, "the charge", func() bool {
		list, err = client.ChargesByIdempotencyKey(ctx, req.IdempotencyKey)
		return err == nil && len(list) > 0
	})
	if len(list) != 1 || !list[0].Succeeded() {
		t.Fatalf("charges under key = %+v", list)
	}
	got, err := client.Charge(ctx, req)
	if err != nil || got.ID != list[0].ID || !got.Succeeded {
		t.Errorf("retry = %+v, %v; want charge %s", got, err, list[0].ID)
	}
	if list, err := client.ChargesByIdempotencyKey(ctx, req.IdempotencyKey); err != nil || len(list) != 1 {
		t.Errorf("after retry: %d charges, %v", len(list), err)
	}
}

func TestChargeChaos(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		chaos      fakeprocessor.Chaos
		wantCharge bool
	}{
		{"Fail", fakeprocessor.Chaos{FailRate: 1}, false},
		{"Drop", fakeprocessor.Chaos{DropRate: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := chaosClient(t, tt.chaos)
			ctx := context.Background()
			req := chargeReq("chaos", "pm_card_visa")

			_, err := client.Charge(ctx, req)
			if !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Fatalf("err = %v, want ErrProcessorUnknown", err)
			}
			list, err := client.ChargesByIdempotencyKey(ctx, req.IdempotencyKey)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(list) == 1; got != tt.wantCharge || len(list) > 1 {
				t.Fatalf("charges under key = %+v", list)
			}
			if !tt.wantCharge {
				return
			}
			// A dropped answer is replayed to the retry.
			got, err := client.Charge(ctx, req)
			if err != nil || got.ID != list[0].ID {
				t.Errorf("retry = %+v, %v; want charge %s", got, err, list[0].ID)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	ctx := context.Background()

	declined, err := client.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "look-1", PaymentID: "pay_look", Amount: 10, Currency: "USD", PaymentMethod: "pm_card_declined"})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := client.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "look-2", PaymentID: "pay_look", Amount: 10, Currency: "USD", PaymentMethod: "pm_card_visa"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ByPayment", func(t *testing.T) {
		t.Parallel()
		list, err := client.ChargesByPayment(ctx, "pay_look")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != declined.ID || list[1].ID != ok.ID {
			t.Errorf("list = %+v", list)
		}
	})
	t.Run("ByKeyNone", func(t *testing.T) {
		t.Parallel()
		list, err := client.ChargesByIdempotencyKey(ctx, "never-used")
		if err != nil || list == nil || len(list) != 0 {
			t.Errorf("list = %#v, %v; want empty", list, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetCharge(ctx, "ch_missing")
		if !errors.Is(err, fake.ErrNotFound) || errors.Is(err, operation.ErrProcessorUnknown) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}
