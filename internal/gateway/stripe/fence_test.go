package stripe_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// Answers of the fence's calls.
var (
	// fenceIntent is the fence PaymentIntent, as made.
	fenceIntent = func(key string) string {
		return paymentIntent("pi_f", "requires_payment_method", key, map[string]any{"amount": 50, "payment_method": nil,
			"metadata": map[string]string{"fence": "true", "downstream_key": key}})
	}
	// keyUsed is Stripe's refusal of a key used with other parameters.
	keyUsed = failure(http.StatusBadRequest, "idempotency_error", "", map[string]any{
		"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."})
	// unexpectedState is Stripe's refusal to cancel a PaymentIntent in
	// state, which it carries.
	unexpectedState = func(id, state, key string) reply {
		return failure(http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state", map[string]any{
			"message":        "You cannot cancel this PaymentIntent because it has a status of " + state + ".",
			"payment_intent": rawJSON(paymentIntent(id, state, key, nil))})
	}
)

// TestCloseCharge: the fence, made or refused, and what each answer after
// it becomes.
func TestCloseCharge(t *testing.T) {
	t.Parallel()
	const (
		create      = "POST /v1/payment_intents"
		search      = "GET /v1/payment_intents/search"
		retrieve    = "GET /v1/payment_intents/pi_1"
		cancel      = "POST /v1/payment_intents/pi_1/cancel"
		cancelFence = "POST /v1/payment_intents/pi_f/cancel"
	)
	found := ok(searchResult("", paymentIntent("pi_1", "processing", chargeKey, nil)))
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		made    bool
		outcome operation.Outcome
	}{
		{name: "NotMade", routes: map[string][]reply{
			create:      {ok(fenceIntent(chargeKey))},
			cancelFence: {ok(paymentIntent("pi_f", "canceled", chargeKey, nil))},
			search:      {ok(searchResult("", fenceIntent(chargeKey)))}}},
		{name: "NotMadeClosedBefore", routes: map[string][]reply{
			create:      {replayed(fenceIntent(chargeKey))},
			cancelFence: {unexpectedState("pi_f", "canceled", chargeKey)},
			search:      {ok(searchResult(""))}}},
		{name: "NotMadeCancelCarriesNoIntent", routes: map[string][]reply{
			create:                         {replayed(fenceIntent(chargeKey))},
			cancelFence:                    {failure(http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state", nil)},
			"GET /v1/payment_intents/pi_f": {ok(paymentIntent("pi_f", "canceled", chargeKey, nil))},
			search:                         {ok(searchResult(""))}}},
		// Stripe forgot the key, older than KeyRetention: the fence is made,
		// and the search still finds what was made under it.
		{name: "KeyForgottenSucceeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			create:      {ok(fenceIntent(chargeKey))},
			cancelFence: {ok(paymentIntent("pi_f", "canceled", chargeKey, nil))},
			search:      {found}, retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}},
		{name: "FenceCancelFails", want: unknown, routes: map[string][]reply{
			create:      {ok(fenceIntent(chargeKey))},
			cancelFence: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "Succeeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}},
		{name: "Declined", made: true, outcome: operation.Outcome{ID: "pi_1", FailureCode: "insufficient_funds", FailureMessage: "Declined."},
			routes: map[string][]reply{create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_payment_method", chargeKey,
				map[string]any{"last_payment_error": lastPaymentError("card_declined", "insufficient_funds", "Declined.")}))}}},
		{name: "RequiresActionCanceled", made: true, outcome: operation.Outcome{ID: "pi_1", FailureCode: "canceled"}, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {ok(paymentIntent("pi_1", "canceled", chargeKey, nil))}}},
		{name: "CancelRefusedSucceeded", made: true, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {unexpectedState("pi_1", "succeeded", chargeKey)}}},
		{name: "CancelRefusedProcessing", want: unknown, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_confirmation", chargeKey, nil))},
			cancel: {unexpectedState("pi_1", "processing", chargeKey)}}},
		{name: "CancelFails", want: unknown, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))},
			cancel: {failure(http.StatusTooManyRequests, "invalid_request_error", "lock_timeout", nil)}}},
		{name: "Processing", want: unknown, routes: map[string][]reply{
			create: {keyUsed}, search: {found}, retrieve: {ok(paymentIntent("pi_1", "processing", chargeKey, nil))}}},
		{name: "SearchLags", want: unknown, routes: map[string][]reply{create: {keyUsed}, search: {ok(searchResult(""))}}},
		{name: "SearchFails", want: unknown, routes: map[string][]reply{
			create: {keyUsed}, search: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "KeyInUse", want: unknown, routes: map[string][]reply{
			create: {failure(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", nil)}}},
		{name: "RateLimited", want: unknown, routes: map[string][]reply{
			create: {failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)}}},
		{name: "ServerError", want: unknown, routes: map[string][]reply{create: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "Timeout", want: unknown, routes: map[string][]reply{create: {{hang: true}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, made, err := s.client(t, 500*time.Millisecond, 0).CloseCharge(context.Background(), payments.ChargeRequest{IdempotencyKey: chargeKey})
			check(t, tt.want, tt.outcome, got, err)
			if made != tt.made {
				t.Errorf("made = %v, want %v", made, tt.made)
			}
			wantFence(t, s, chargeKey)
		})
	}
}

// wantFence fails unless the server got the fence under key: one create of
// a fixed, unconfirmed PaymentIntent.
func wantFence(t *testing.T, s *server, key string) {
	t.Helper()
	got := s.requests("POST /v1/payment_intents")
	if len(got) != 1 {
		t.Fatalf("%d creates, want the fence", len(got))
	}
	if k := got[0].header.Get("Idempotency-Key"); k != key {
		t.Errorf("Idempotency-Key = %q, want %q", k, key)
	}
	wantForm(t, got[0].form, map[string]string{"amount": "50", "currency": "usd", "confirm": "false",
		"payment_method_types[0]": "card", "metadata[fence]": "true", "metadata[downstream_key]": key})
	if len(got[0].form) != 6 {
		t.Errorf("form = %v, want the 6 fields above", got[0].form)
	}
}

// TestCloseRefund: the fence under a refund's key, and the refund it finds
// when the key was used.
func TestCloseRefund(t *testing.T) {
	t.Parallel()
	const refundList = "GET /v1/refunds"
	// keyUsedRefund is the refusal of a key used on another endpoint.
	keyUsedRefund := failure(http.StatusBadRequest, "idempotency_error", "", map[string]any{
		"message": "Keys for idempotent requests can only be used for the same endpoint they were first used for ('/v1/refunds' vs '/v1/payment_intents')."})
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		made    bool
		outcome operation.Outcome
	}{
		{name: "NotMade", routes: map[string][]reply{
			"POST /v1/payment_intents":             {ok(fenceIntent(refundKey))},
			"POST /v1/payment_intents/pi_f/cancel": {ok(paymentIntent("pi_f", "canceled", refundKey, nil))},
			refundList:                             {ok(list("/v1/refunds", false))}}},
		{name: "KeyForgotten", made: true, outcome: operation.Outcome{ID: "re_1", Succeeded: true}, routes: map[string][]reply{
			"POST /v1/payment_intents":             {ok(fenceIntent(refundKey))},
			"POST /v1/payment_intents/pi_f/cancel": {ok(paymentIntent("pi_f", "canceled", refundKey, nil))},
			refundList:                             {ok(list("/v1/refunds", false, refund("re_1", "succeeded", refundKey, nil)))}}},
		{name: "Succeeded", made: true, outcome: operation.Outcome{ID: "re_1", Succeeded: true}, routes: map[string][]reply{
			"POST /v1/payment_intents": {keyUsedRefund},
			refundList:                 {ok(list("/v1/refunds", false, refund("re_1", "succeeded", refundKey, nil)))}}},
		{name: "Failed", made: true, outcome: operation.Outcome{ID: "re_1", FailureCode: "expired_or_canceled_card"}, routes: map[string][]reply{
			"POST /v1/payment_intents": {keyUsedRefund},
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "failed", refundKey,
				map[string]any{"failure_reason": "expired_or_canceled_card"})))}}},
		{name: "Pending", want: unknown, routes: map[string][]reply{
			"POST /v1/payment_intents": {keyUsedRefund},
			refundList:                 {ok(list("/v1/refunds", false, refund("re_1", "pending", refundKey, nil)))}}},
		{name: "NotListed", want: unknown, routes: map[string][]reply{
			"POST /v1/payment_intents": {keyUsedRefund},
			refundList:                 {ok(list("/v1/refunds", false))}}},
		{name: "KeyInUse", want: unknown, routes: map[string][]reply{
			"POST /v1/payment_intents": {failure(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", nil)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, made, err := s.client(t, 5*time.Second, 0).CloseRefund(context.Background(), refunds.Request{IdempotencyKey: refundKey})
			check(t, tt.want, tt.outcome, got, err)
			if made != tt.made {
				t.Errorf("made = %v, want %v", made, tt.made)
			}
			wantFence(t, s, refundKey)
		})
	}
}
