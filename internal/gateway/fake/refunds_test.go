package fake_test

import (
	"context"
	"testing"

	"github.com/example/payments/internal/refunds"
)

func TestRefund(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	ctx := context.Background()
	charge := mustCharge(t, client, "refund-target", "pm_card_visa")

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		req := refunds.Request{IdempotencyKey: "refund-ok", ChargeID: charge.ID, Amount: 100}
		got, err := client.Refund(ctx, req)
		if err != nil || got.ID == "" || !got.Succeeded {
			t.Fatalf("refund = %+v, %v", got, err)
		}
		if again, err := client.Refund(ctx, req); err != nil || again != got {
			t.Errorf("retry = %+v, %v; want %+v", again, err, got)
		}
		list, err := client.RefundsByIdempotencyKey(ctx, req.IdempotencyKey)
		if err != nil || len(list) != 1 {
			t.Fatalf("refunds by key = %+v, %v", list, err)
		}
		if r := list[0]; r.ID != got.ID || r.Charge != charge.ID || r.Amount != 100 || !r.Succeeded() ||
			r.IdempotencyKey != req.IdempotencyKey || r.CreatedAt.IsZero() {
			t.Errorf("refund object = %+v", r)
		}
	})

	// Refusals are definite: nothing was refunded, and retrying cannot
	// change that.
	refusals := []struct {
		name     string
		req      refunds.Request
		wantCode string
	}{
		{"ErrUnknownCharge", refunds.Request{IdempotencyKey: "refund-404", ChargeID: "ch_missing", Amount: 1}, "resource_missing"},
		{"ErrTooLarge", refunds.Request{IdempotencyKey: "refund-large", ChargeID: charge.ID, Amount: 1_000_000}, "amount_too_large"},
		{"ErrKeyReused", refunds.Request{IdempotencyKey: "refund-target", ChargeID: charge.ID, Amount: 1}, "idempotency_key_reused"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := client.Refund(ctx, tt.req)
			if err != nil || got.ID != "" || got.Succeeded || got.FailureCode != tt.wantCode || got.FailureMessage == "" {
				t.Errorf("refund = %+v, %v; want a refusal %s", got, err, tt.wantCode)
			}
		})
	}
}
