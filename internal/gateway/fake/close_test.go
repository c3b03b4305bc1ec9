package fake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/fakeprocessor"
)

func TestFind(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	ctx := context.Background()

	if _, found, err := client.Charges().Find(ctx, payments.ChargeRequest{IdempotencyKey: "find-none"}); err != nil || found {
		t.Errorf("FindCharge of an unused key: %v, %v", found, err)
	}
	if _, found, err := client.Refunds().Find(ctx, refunds.Request{IdempotencyKey: "find-none"}); err != nil || found {
		t.Errorf("FindRefund of an unused key: %v, %v", found, err)
	}

	declined := mustCharge(t, client, "find-declined", "pm_card_declined")
	if got, found, err := client.Charges().Find(ctx, payments.ChargeRequest{IdempotencyKey: "find-declined"}); err != nil || !found || got != declined {
		t.Errorf("FindCharge = %+v, %v, %v; want %+v", got, found, err, declined)
	}
	refund := mustRefund(t, client, "find-refund", mustCharge(t, client, "find-charge", "pm_card_visa").ID, 10)
	if got, found, err := client.Refunds().Find(ctx, refunds.Request{IdempotencyKey: "find-refund"}); err != nil || !found || got != refund {
		t.Errorf("FindRefund = %+v, %v, %v; want %+v", got, found, err, refund)
	}
	// Keys are per operation kind: a charge's key finds no refund.
	if _, found, err := client.Refunds().Find(ctx, refunds.Request{IdempotencyKey: "find-charge"}); err != nil || found {
		t.Errorf("FindRefund of a charge's key: %v, %v", found, err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	ctx := context.Background()

	t.Run("ChargeNone", func(t *testing.T) {
		t.Parallel()
		if got, made, err := client.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: "close-none"}); err != nil || made || got != (operation.Outcome{}) {
			t.Fatalf("close = %+v, %v, %v; want nothing made", got, made, err)
		}
		got, err := client.Charge(ctx, chargeReq("close-none", "pm_card_visa"))
		if !errors.Is(err, operation.ErrKeyClosed) || errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("charge after close = %+v, %v; want ErrKeyClosed", got, err)
		}
		if list, err := client.ChargesByIdempotencyKey(ctx, "close-none"); err != nil || len(list) != 0 {
			t.Errorf("charges under key = %+v, %v", list, err)
		}
		// Closing again answers the same.
		if _, made, err := client.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: "close-none"}); err != nil || made {
			t.Errorf("second close = %v, %v", made, err)
		}
	})
	t.Run("ChargeMade", func(t *testing.T) {
		t.Parallel()
		for _, method := range []string{"pm_card_visa", "pm_card_declined"} {
			key := "close-" + method
			charge := mustCharge(t, client, key, method)
			if got, made, err := client.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: key}); err != nil || !made || got != charge {
				t.Errorf("close = %+v, %v, %v; want %+v", got, made, err, charge)
			}
			// The charge's own retry still replays it.
			if again, err := client.Charge(ctx, chargeReq(key, method)); err != nil || again != charge {
				t.Errorf("retry = %+v, %v; want %+v", again, err, charge)
			}
		}
	})
	t.Run("Refund", func(t *testing.T) {
		t.Parallel()
		charge := mustCharge(t, client, "close-refund-target", "pm_card_visa")
		refund := mustRefund(t, client, "close-refund-made", charge.ID, 5)
		if got, made, err := client.Refunds().Close(ctx, refunds.Request{IdempotencyKey: "close-refund-made"}); err != nil || !made || got != refund {
			t.Errorf("close = %+v, %v, %v; want %+v", got, made, err, refund)
		}
		if _, made, err := client.Refunds().Close(ctx, refunds.Request{IdempotencyKey: "close-refund-none"}); err != nil || made {
			t.Fatalf("close = %v, %v; want nothing made", made, err)
		}
		_, err := client.Refund(ctx, refunds.Request{IdempotencyKey: "close-refund-none", ChargeID: charge.ID, Amount: 5})
		if !errors.Is(err, operation.ErrKeyClosed) {
			t.Errorf("refund after close: %v; want ErrKeyClosed", err)
		}
		if list, err := client.RefundsByIdempotencyKey(ctx, "close-refund-none"); err != nil || len(list) != 0 {
			t.Errorf("refunds under key = %+v, %v", list, err)
		}
	})
	t.Run("ErrChaos", func(t *testing.T) {
		t.Parallel()
		failing := chaosClient(t, fakeprocessor.Chaos{FailRate: 1})
		if _, _, err := failing.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: "close-chaos"}); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Errorf("close: %v; want ErrProcessorUnknown", err)
		}
		dropping := chaosClient(t, fakeprocessor.Chaos{DropRate: 1})
		if _, _, err := dropping.Refunds().Close(ctx, refunds.Request{IdempotencyKey: "close-chaos"}); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Errorf("close: %v; want ErrProcessorUnknown", err)
		}
	})
}
