package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/example/payments/client"
)

// Example creates a payment with safe retries and handles each outcome. It
// needs the API running on localhost:8080, so it has no Output line.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := client.New("http://localhost:8080", "sk_test_acme",
		client.WithMaxAttempts(5),
		client.WithWait(10), // let the server wait up to 10s before it answers 202
	)

	// Store the key with the order first: calling again with it after a
	// crash can never charge twice.
	key := client.NewIdempotencyKey()
	description := "Order 1842"
	p, resp, err := c.CreatePayment(ctx, key, client.CreatePaymentParams{
		Amount:        2000,
		Currency:      "usd",
		PaymentMethod: "pm_card_visa",
		Description:   &description,
		Metadata:      map[string]string{"order_id": "1842"},
	})
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.IsDeclined():
		fmt.Printf("payment %s declined: %s\n", p.ID, apiErr.Code)
	case err != nil:
		log.Printf("outcome unknown, retry later with key %s: %v", resp.IdempotencyKey, err)
	case p.Status == client.StatusProcessing:
		fmt.Printf("payment %s accepted, still processing\n", p.ID)
	default:
		fmt.Printf("payment %s %s (replayed: %v)\n", p.ID, p.Status, resp.Replayed)
	}
}
