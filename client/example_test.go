package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
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

// ExampleWebhook receives webhook deliveries: it verifies each on the raw
// body before it trusts it, then decodes the event.
func ExampleWebhook() {
	// The secret the endpoint's registration answered with, kept since.
	wh, err := client.NewWebhook("whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("POST /hooks", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := wh.Verify(r.Header, body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ev client.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// Delivery is at least once: skip an ev.ID seen before.
		if p, err := ev.Payment(); err == nil {
			fmt.Printf("%s: payment %s %s\n", ev.Type, p.ID, p.Status)
		}
	})
}
