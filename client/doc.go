// Package client is the Go client of the payments API. It makes every POST
// safe to retry: each call carries an Idempotency-Key, generated once per call
// when the caller gives none, and every retry of that call sends the same key,
// so a payment is charged at most once however often the network fails.
//
// A call retries, with the same key, what may succeed later: 409
// idempotency_key_in_use, 503 and other 5xx answers, dropped connections and
// timeouts, and 202 (the payment is still processing). It waits as the
// server's Retry-After says, else with exponential backoff and full jitter.
// Answers that cannot change are returned at once: a decline (402) is final,
// and 4xx errors such as 400, 401, 404, 413, 415 and 422 come back as *Error.
//
// Usage:
//
//	c := client.New("http://localhost:8080", "sk_test_acme", client.WithWait(10))
//	p, resp, err := c.CreatePayment(ctx, "order-1842", client.CreatePaymentParams{
//		Amount:        2000,
//		Currency:      "usd",
//		PaymentMethod: "pm_card_visa",
//	})
//	var apiErr *client.Error
//	switch {
//	case errors.As(err, &apiErr) && apiErr.IsDeclined():
//		// Final: p is the failed payment; apiErr.Code says why.
//	case err != nil:
//		// The outcome is unknown: call again later with resp.IdempotencyKey.
//	case p.Status == client.StatusProcessing:
//		// Accepted but not finished: poll c.GetPayment(ctx, p.ID).
//	default:
//		// p.Status == client.StatusSucceeded.
//	}
//
// Webhook endpoints, their delivery logs and events have calls of their own.
// Their POSTs (create, update, rotate, resend, recover) carry a key and retry
// like CreatePayment; the 202 of a resend or a recovery is final. A receiver
// checks each delivery on its raw body with VerifySignature, or with a
// Webhook holding both secrets while one is rotated, before it decodes the
// body as an Event; it deduplicates by the webhook-id header.
//
// The package mirrors the API's wire format in its own types and depends on
// nothing but the standard library.
package client
