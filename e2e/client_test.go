package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/client"
	"github.com/example/payments/tools/testdb"
)

// TestClient drives the binaries with the public Go client.
func TestClient(t *testing.T) {
	t.Parallel()
	s := startStack(t, testdb.New(t).URL, nil, nil)
	ctx := context.Background()
	c := client.New(s.apiURL, "sk_test_acme", client.WithWait(10))

	p, resp, err := c.CreatePayment(ctx, "", client.CreatePaymentParams{Amount: 2500, Currency: "usd", PaymentMethod: "pm_card_visa"})
	if err != nil || p.Status != client.StatusSucceeded || resp.Replayed || resp.IdempotencyKey == "" {
		t.Fatalf("create: %+v %+v %v", p, resp, err)
	}
	again, resp2, err := c.CreatePayment(ctx, resp.IdempotencyKey, client.CreatePaymentParams{Amount: 2500, Currency: "usd", PaymentMethod: "pm_card_visa"})
	if err != nil || again.ID != p.ID || !resp2.Replayed {
		t.Fatalf("retry with the same key: %+v %+v %v", again, resp2, err)
	}

	declined, _, err := c.CreatePayment(ctx, "", client.CreatePaymentParams{Amount: 100, Currency: "USD", PaymentMethod: "pm_card_insufficient_funds"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || !apiErr.IsDeclined() || apiErr.Code != "insufficient_funds" || declined == nil || declined.Status != client.StatusFailed {
		t.Fatalf("decline: %+v %v", declined, err)
	}

	amount := int64(1000)
	r, _, err := c.CreateRefund(ctx, "", p.ID, client.CreateRefundParams{Amount: &amount})
	if err != nil || r.Status != client.StatusSucceeded || r.Amount != 1000 {
		t.Fatalf("refund: %+v %v", r, err)
	}
	if got, err := c.GetPayment(ctx, p.ID); err != nil || got.AmountRefunded != 1000 {
		t.Fatalf("payment after refund: %+v %v", got, err)
	}
}

// TestChaos sends payments through a processor that fails and drops a share
// of its answers, each payment raced by three clients with one key, and
// proves invariant 1: exactly one charge per accepted key, whatever happens.
func TestChaos(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	run(t, "api", []string{"DATABASE_URL=" + db.URL, "APP_ENV=development"}, "seed")
	s := newStack(t, db.URL)
	s.startProcessor("PROCESSOR_FAIL_RATE=0.3", "PROCESSOR_DROP_RATE=0.3", "PROCESSOR_LATENCY=20ms")
	s.startWorker()
	s.startAPI()

	const payments, racers = 15, 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ids := make([][racers]string, payments)
	var wg sync.WaitGroup
	for i := range payments {
		for j := range racers {
			wg.Go(func() {
				c := client.New(s.apiURL, "sk_test_acme", client.WithWait(5), client.WithMaxAttempts(30),
					client.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
				params := client.CreatePaymentParams{Amount: int64(100 + i), Currency: "USD", PaymentMethod: "pm_card_visa"}
				for ctx.Err() == nil {
					p, resp, err := c.CreatePayment(ctx, fmt.Sprintf("chaos-%d", i), params)
					if err == nil && resp.StatusCode != http.StatusAccepted {
						ids[i][j] = p.ID
						return
					}
				}
				t.Errorf("payment %d racer %d: no final answer in time", i, j)
			})
		}
	}
	wg.Wait()
	for i, racing := range ids {
		for _, id := range racing {
			if id != racing[0] {
				t.Fatalf("payment %d: racers got different payments %v", i, racing)
			}
		}
		if n := len(chargesFor(t, s, racing[0])); n != 1 {
			t.Errorf("payment %s: %d processor charges, want 1", racing[0], n)
		}
	}
	// The chaos must have bitten: some charges needed more than one attempt.
	var retried int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND attempt > 1`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	if retried == 0 {
		t.Fatal("no charge was retried: the processor's chaos did not take effect")
	}
	t.Logf("%d of %d charges needed retries", retried, payments)
}
