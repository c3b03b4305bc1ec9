package fake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
)

// TestLedger walks the processor's ledger of charges and refunds page by
// page and checks that every row is seen once, in order.
func TestLedger(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	client.PageSize = 3
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)

	var charges, refundIDs []string
	for i := range 7 {
		key := "ledger-" + string(rune('a'+i))
		c := mustCharge(t, client, key, "pm_card_visa")
		charges = append(charges, c.ID)
		if i < 5 {
			refundIDs = append(refundIDs, mustRefund(t, client, key+"-refund", c.ID, 1).ID)
		}
	}

	type pager func(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error)
	walk := func(t *testing.T, page pager) (ids []string, pages int) {
		t.Helper()
		cursor := ""
		for pages = 1; pages < 10; pages++ {
			entries, next, err := page(ctx, since, cursor)
			if err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			for _, e := range entries {
				if e.IdempotencyKey == "" || e.Amount <= 0 || !e.Succeeded || !e.CreatedAt.After(since) {
					t.Errorf("entry = %+v", e)
				}
				ids = append(ids, e.ID)
			}
			if next == "" {
				return ids, pages
			}
			if next != entries[len(entries)-1].ID {
				t.Fatalf("next = %q, want the page's last id", next)
			}
			cursor = next
		}
		t.Fatal("the ledger never ends")
		return nil, 0
	}

	t.Run("Charges", func(t *testing.T) {
		t.Parallel()
		ids, pages := walk(t, client.Charges().Ledger)
		if pages != 3 || !slices.Equal(ids, charges) {
			t.Fatalf("%d pages of %v, want 3 of %v", pages, ids, charges)
		}
		entries, _, err := client.Charges().Ledger(ctx, since, "")
		if err != nil || entries[0].Reference != "pay_ledger-a" || entries[0].Amount != 1500 || entries[0].Currency != "USD" {
			t.Errorf("first entry = %+v, %v; want its payment id, amount and currency", entries, err)
		}
	})
	t.Run("Refunds", func(t *testing.T) {
		t.Parallel()
		ids, pages := walk(t, client.Refunds().Ledger)
		entries, _, err := client.Refunds().Ledger(ctx, since, "")
		if err != nil || entries[0].Reference != "" {
			t.Errorf("first entry = %+v, %v; want no reference: its key is no refund's of ours", entries, err)
		}
		if pages != 2 || !slices.Equal(ids, refundIDs) {
			t.Fatalf("%d pages of %v, want 2 of %v", pages, ids, refundIDs)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		entries, next, err := client.Charges().Ledger(ctx, time.Now().Add(time.Hour), "")
		if err != nil || len(entries) != 0 || next != "" {
			t.Errorf("ledger after now = %+v, %q, %v", entries, next, err)
		}
	})
}
