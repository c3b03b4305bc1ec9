package stripe_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
)

// Answers of the fence's calls.
var (
	// fenceCustomer is the fence, a Customer, as made.
	fenceCustomer = func(key string) string {
		return object(map[string]any{"id": "cus_f", "object": "customer", "description": "fence",
			"metadata": map[string]string{"fence": "true", "downstream_key": key}}, nil)
	}
	// keyUsed is Stripe's refusal of a key used with other parameters or
	// on another endpoint.
	keyUsed = failure(http.StatusBadRequest, "idempotency_error", "", map[string]any{
		"message": "Keys for idempotent requests can only be used for the same endpoint they were first used for ('/v1/customers' vs '/v1/payment_intents')."})
	// unexpectedState is Stripe's refusal to cancel a PaymentIntent in
	// state, which it carries.
	unexpectedState = func(id, state, key string) reply {
		return failure(http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state", map[string]any{
			"message":        "You cannot cancel this PaymentIntent because it has a status of " + state + ".",
			"payment_intent": rawJSON(paymentIntent(id, state, key, nil))})
	}
	// savedServerError is a 500 Stripe saved for the key, replayed.
	savedServerError = func() reply {
		return failure(http.StatusInternalServerError, "api_error", "", nil).replay()
	}
)

// TestCloseCharge: the fence, made or refused, and what each answer after
// it becomes.
func TestCloseCharge(t *testing.T) {
	t.Parallel()
	const (
		fence    = "POST /v1/customers"
		search   = "GET /v1/payment_intents/search"
		listed   = "GET /v1/payment_intents"
		retrieve = "GET /v1/payment_intents/pi_1"
		cancel   = "POST /v1/payment_intents/pi_1/cancel"
	)
	found := ok(searchResult("", paymentIntent("pi_1", "processing", chargeKey, nil)))
	none, nothing := ok(searchResult("")), ok(list("/v1/payment_intents", false))
	oldFence := paymentIntent("pi_f", "canceled", chargeKey, map[string]any{"metadata": map[string]string{"fence": "true", "downstream_key": chargeKey}})
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		made    bool
		outcome operation.Outcome
	}{
		{name: "NotMade", routes: map[string][]reply{fence: {ok(fenceCustomer(chargeKey))}, search: {none}, listed: {nothing}}},
		{name: "NotMadeClosedBefore", routes: map[string][]reply{fence: {ok(fenceCustomer(chargeKey)).replay()}, search: {none}, listed: {nothing}}},
		// A 500 Stripe saved for the fence's own request holds the key: it
		// replays only a request with the same endpoint and parameters.
		{name: "FenceSavedServerError", routes: map[string][]reply{fence: {savedServerError()}, search: {none}, listed: {nothing}}},
		// A fence PaymentIntent, as an earlier version made, holds it too.
		{name: "HeldByAnOldFence", routes: map[string][]reply{fence: {keyUsed}, search: {none}, listed: {ok(list("/v1/payment_intents", false, oldFence))}}},
		// Stripe forgot the key, older than KeyRetention: the fence is made,
		// and the lookup still finds what was made under it.
		{name: "KeyForgottenSucceeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			fence: {ok(fenceCustomer(chargeKey))}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}},
		{name: "Succeeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}},
		{name: "SucceededListed", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			fence: {keyUsed}, search: {none}, listed: {ok(list("/v1/payment_intents", false, paymentIntent("pi_1", "succeeded", chargeKey, nil)))},
			retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}},
		{name: "Declined", made: true, outcome: operation.Outcome{ID: "pi_1", FailureCode: "insufficient_funds", FailureMessage: "Declined."},
			routes: map[string][]reply{fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_payment_method", chargeKey,
				map[string]any{"last_payment_error": lastPaymentError("card_declined", "insufficient_funds", "Declined.")}))}}},
		{name: "RequiresActionCanceled", made: true, outcome: operation.Outcome{ID: "pi_1", FailureCode: "canceled"}, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {ok(paymentIntent("pi_1", "canceled", chargeKey, nil))}}},
		{name: "CancelRefusedSucceeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {unexpectedState("pi_1", "succeeded", chargeKey)}}},
		{name: "CancelRefusedProcessing", want: unknown, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_confirmation", chargeKey, nil))},
			cancel: {unexpectedState("pi_1", "processing", chargeKey)}}},
		{name: "CancelFails", want: unknown, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {failure(http.StatusTooManyRequests, "invalid_request_error", "lock_timeout", nil)}}},
		{name: "Processing", want: unknown, routes: map[string][]reply{
			fence: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "processing", chargeKey, nil))}}},
		// The key was used (a saved 500 of the charge's, say) and nothing
		// is listed: unknown until Stripe forgets the key.
		{name: "UsedNothingListed", want: unknown, routes: map[string][]reply{fence: {keyUsed}, search: {none}, listed: {nothing}}},
		{name: "ListFails", want: unknown, routes: map[string][]reply{
			fence: {keyUsed}, search: {none}, listed: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "KeyInUse", want: unknown, routes: map[string][]reply{
			fence: {failure(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", nil)}}},
		{name: "RateLimited", want: unknown, routes: map[string][]reply{
			fence: {failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)}}},
		{name: "ServerError", want: unknown, routes: map[string][]reply{fence: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "Timeout", want: unknown, routes: map[string][]reply{fence: {{hang: true}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, made, err := s.client(t, 500*time.Millisecond, 0).CloseCharge(context.Background(), chargeRequest())
			check(t, tt.want, tt.outcome, got, err)
			if made != tt.made {
				t.Errorf("made = %v, want %v", made, tt.made)
			}
			wantFence(t, s, chargeKey)
			if n := len(s.requests("POST /v1/payment_intents")); n != 0 {
				t.Errorf("%d PaymentIntents created by a close, want none", n)
			}
		})
	}
}

// wantFence fails unless the server got the fence under key: one create of
// a Customer, its body fixed for the key and naming no amount.
func wantFence(t *testing.T, s *server, key string) {
	t.Helper()
	got := s.requests("POST /v1/customers")
	if len(got) != 1 {
		t.Fatalf("%d creates, want the fence", len(got))
	}
	if k := got[0].header.Get("Idempotency-Key"); k != key {
		t.Errorf("Idempotency-Key = %q, want %q", k, key)
	}
	wantForm(t, got[0].form, map[string]string{"description": "fence: nothing is ever made under downstream key " + key,
		"metadata[fence]": "true", "metadata[downstream_key]": key})
	if len(got[0].form) != 3 {
		t.Errorf("form = %v, want the 3 fields above", got[0].form)
	}
}

// TestCloseRefund: the fence under a refund's key, and the refund it finds
// when the key was used.
func TestCloseRefund(t *testing.T) {
	t.Parallel()
	const fence, refundList = "POST /v1/customers", "GET /v1/refunds"
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		made    bool
		outcome operation.Outcome
	}{
		{name: "NotMade", routes: map[string][]reply{fence: {ok(fenceCustomer(refundKey))}, refundList: {ok(list("/v1/refunds", false))}}},
		{name: "KeyForgotten", made: true, outcome: operation.Outcome{ID: "re_1", Succeeded: true}, routes: map[string][]reply{
			fence:      {ok(fenceCustomer(refundKey))},
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "succeeded", refundKey, nil)))}}},
		{name: "Succeeded", made: true, outcome: operation.Outcome{ID: "re_1", Succeeded: true}, routes: map[string][]reply{
			fence:      {keyUsed},
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "succeeded", refundKey, nil)))}}},
		{name: "Failed", made: true, outcome: operation.Outcome{ID: "re_1", FailureCode: "expired_or_canceled_card"}, routes: map[string][]reply{
			fence: {keyUsed},
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "failed", refundKey,
				map[string]any{"failure_reason": "expired_or_canceled_card"})))}}},
		{name: "Pending", want: unknown, routes: map[string][]reply{
			fence: {keyUsed}, refundList: {ok(list("/v1/refunds", false, refund("re_1", "pending", refundKey, nil)))}}},
		{name: "NotListed", want: unknown, routes: map[string][]reply{fence: {keyUsed}, refundList: {ok(list("/v1/refunds", false))}}},
		{name: "KeyInUse", want: unknown, routes: map[string][]reply{
			fence: {failure(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", nil)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, made, err := s.client(t, 5*time.Second, 0).CloseRefund(context.Background(), refundRequest())
			check(t, tt.want, tt.outcome, got, err)
			if made != tt.made {
				t.Errorf("made = %v, want %v", made, tt.made)
			}
			wantFence(t, s, refundKey)
			if reqs := s.requests(refundList); len(reqs) > 0 && reqs[0].form.Get("payment_intent") != "pi_1" {
				t.Errorf("refunds listed with %v, want those of pi_1", reqs[0].form)
			}
		})
	}
}

// TestFenceHeldWithinRetention: a fence made under a key Stripe still
// remembers every use of (the charge is younger than its 24 hours) proves
// nothing was made, with no lookup; once Stripe may have forgotten, the
// close lists every PaymentIntent that could have been made, from the
// five minutes before the charge to now.
func TestFenceHeldWithinRetention(t *testing.T) {
	t.Parallel()
	const fence, search, listed = "POST /v1/customers", "GET /v1/payment_intents/search", "GET /v1/payment_intents"
	routes := func() map[string][]reply {
		return map[string][]reply{fence: {ok(fenceCustomer(chargeKey))}, search: {ok(searchResult(""))},
			listed: {ok(list("/v1/payment_intents", false))}}
	}
	s := serve(t, routes())
	req := chargeRequest()
	req.CreatedAt = time.Now().Add(-2 * time.Hour)
	if out, made, err := s.client(t, 5*time.Second, 0).CloseCharge(context.Background(), req); err != nil || made {
		t.Fatalf("close = %+v, %v, %v; want nothing made", out, made, err)
	}
	if n := len(s.requests(search)) + len(s.requests(listed)); n != 0 {
		t.Errorf("%d lookups after a fence that held within the retention, want none", n)
	}
	s = serve(t, routes())
	req.CreatedAt = time.Now().Add(-30 * time.Hour)
	if out, made, err := s.client(t, 5*time.Second, 0).CloseCharge(context.Background(), req); err != nil || made {
		t.Fatalf("close 30 h on = %+v, %v, %v; want nothing made", out, made, err)
	}
	lists := s.requests(listed)
	if len(lists) != 3 {
		t.Fatalf("%d list requests 30 h on, want the three windows", len(lists))
	}
	created := req.CreatedAt.Unix()
	wantForm(t, lists[2].form, map[string]string{"created[gte]": strconv.FormatInt(created-300, 10), "created[lte]": strconv.FormatInt(created-31, 10)})
	wantForm(t, lists[1].form, map[string]string{"created[gte]": strconv.FormatInt(created+31, 10),
		"created[lte]": strconv.FormatInt(created+24*3600+300, 10)})
}
