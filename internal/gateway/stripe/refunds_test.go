package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/refunds"
)

// refundRequest is the refund of the recorded answers.
func refundRequest() refunds.Request {
	return refunds.Request{IdempotencyKey: refundKey, ChargeID: "pi_1", Amount: 500, Currency: "USD"}
}

// TestRefund: each answer Stripe may give a refund is classified as the
// package doc says.
func TestRefund(t *testing.T) {
	t.Parallel()
	const create, retrieve = "POST /v1/refunds", "GET /v1/refunds/re_1"
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		outcome operation.Outcome
	}{
		{name: "Succeeded", routes: map[string][]reply{create: {ok(refund("re_1", "succeeded", refundKey, nil))}},
			outcome: operation.Outcome{ID: "re_1", Succeeded: true}},
		{name: "Failed", routes: map[string][]reply{create: {ok(refund("re_1", "failed", refundKey,
			map[string]any{"failure_reason": "expired_or_canceled_card"}))}},
			outcome: operation.Outcome{ID: "re_1", FailureCode: "expired_or_canceled_card"}},
		{name: "Canceled", routes: map[string][]reply{create: {ok(refund("re_1", "canceled", refundKey, nil))}},
			outcome: operation.Outcome{ID: "re_1", FailureCode: "canceled"}},
		{name: "PendingThenSucceeded", routes: map[string][]reply{
			create:   {ok(refund("re_1", "pending", refundKey, nil)).replay()},
			retrieve: {ok(refund("re_1", "succeeded", refundKey, nil))}},
			outcome: operation.Outcome{ID: "re_1", Succeeded: true}},
		{name: "StillPending", want: unknown, routes: map[string][]reply{
			create:   {ok(refund("re_1", "pending", refundKey, nil))},
			retrieve: {ok(refund("re_1", "pending", refundKey, nil))}}},
		{name: "RequiresAction", want: unknown, routes: map[string][]reply{
			create:   {ok(refund("re_1", "requires_action", refundKey, nil))},
			retrieve: {ok(refund("re_1", "requires_action", refundKey, nil))}}},
		{name: "AlreadyRefunded", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error",
			"charge_already_refunded", map[string]any{"message": "Charge ch_1 has already been refunded."})}},
			outcome: operation.Outcome{FailureCode: "charge_already_refunded", FailureMessage: "Charge ch_1 has already been refunded."}},
		{name: "AmountTooLarge", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error",
			"amount_too_large", map[string]any{"param": "amount", "message": "Refund amount is greater than unrefunded amount."})}},
			outcome: operation.Outcome{FailureCode: "amount_too_large", FailureMessage: "Refund amount is greater than unrefunded amount."}},
		{name: "RefusedWithoutCode", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error", "",
			map[string]any{"message": "No such payment_intent: 'pi_1'"})}},
			outcome: operation.Outcome{FailureCode: "invalid_request_error", FailureMessage: "No such payment_intent: 'pi_1'"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, err := s.client(t, 5*time.Second, 0).Refund(context.Background(), refundRequest())
			check(t, tt.want, tt.outcome, got, err)
		})
	}
}

// TestRefundRequest: the refund is one Refund of the PaymentIntent under
// the downstream key, its metadata naming the key.
func TestRefundRequest(t *testing.T) {
	t.Parallel()
	s := serve(t, map[string][]reply{"POST /v1/refunds": {ok(refund("re_1", "succeeded", refundKey, nil))}})
	if _, err := s.client(t, 5*time.Second, 0).Refund(context.Background(), refundRequest()); err != nil {
		t.Fatal(err)
	}
	got := s.requests("POST /v1/refunds")
	if len(got) != 1 || got[0].header.Get("Idempotency-Key") != refundKey {
		t.Fatalf("requests = %+v", got)
	}
	wantForm(t, got[0].form, map[string]string{"payment_intent": "pi_1", "amount": "500", "metadata[downstream_key]": refundKey})
	if len(got[0].form) != 3 {
		t.Errorf("form = %v, want the 3 fields above", got[0].form)
	}
}

// TestFindRefund: the list of the payment intent's refunds, every page,
// until the newest naming the key.
func TestFindRefund(t *testing.T) {
	t.Parallel()
	const refundList = "GET /v1/refunds"
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		found   bool
		outcome operation.Outcome
	}{
		{name: "FoundOnSecondPage", found: true, outcome: operation.Outcome{ID: "re_1", Succeeded: true}, routes: map[string][]reply{
			refundList: {ok(list("/v1/refunds", true, refund("re_9", "succeeded", "refund_re_9", nil), refund("re_8", "failed", "", nil))),
				ok(list("/v1/refunds", false, refund("re_1", "succeeded", refundKey, nil)))}}},
		{name: "Failed", found: true, outcome: operation.Outcome{ID: "re_1", FailureCode: "lost_or_stolen_card"}, routes: map[string][]reply{
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "failed", refundKey, map[string]any{"failure_reason": "lost_or_stolen_card"})))}}},
		{name: "None", routes: map[string][]reply{refundList: {ok(list("/v1/refunds", false, refund("re_9", "succeeded", "refund_re_9", nil)))}}},
		{name: "Pending", want: unknown, routes: map[string][]reply{
			refundList: {ok(list("/v1/refunds", false, refund("re_1", "pending", refundKey, nil)))}}},
		{name: "MoreWithoutRefunds", want: unknown, routes: map[string][]reply{refundList: {ok(list("/v1/refunds", true))}}},
		{name: "NotAList", want: unknown, routes: map[string][]reply{refundList: {ok(`{"object":"list","has_more":false}`)}}},
		{name: "ListFails", want: unknown, routes: map[string][]reply{refundList: {failure(http.StatusServiceUnavailable, "api_error", "", nil)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, found, err := s.client(t, 5*time.Second, 0).FindRefund(context.Background(), refundRequest())
			check(t, tt.want, tt.outcome, got, err)
			if found != tt.found {
				t.Errorf("found = %v, want %v", found, tt.found)
			}
			reqs := s.requests(refundList)
			wantForm(t, reqs[0].form, map[string]string{"limit": "100", "payment_intent": refundRequest().ChargeID})
			if len(reqs[0].form) != 2 {
				t.Errorf("form = %v, want the payment intent's refunds, no window", reqs[0].form)
			}
			if len(reqs) > 1 {
				wantForm(t, reqs[1].form, map[string]string{"starting_after": "re_8", "limit": "100", "payment_intent": refundRequest().ChargeID})
			}
		})
	}
	// A refund naming no payment intent cannot be looked up: unknown, and
	// nothing is asked.
	s := serve(t, map[string][]reply{})
	if _, _, err := s.client(t, time.Second, 0).FindRefund(context.Background(), refunds.Request{IdempotencyKey: refundKey}); !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Errorf("no payment intent: %v", err)
	}
}
