package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
)

// chargeCreated is when the charge of the recorded answers was created.
var chargeCreated = time.Unix(1_700_000_000, 0)

// chargeRequest is the charge of the recorded answers.
func chargeRequest() payments.ChargeRequest {
	return payments.ChargeRequest{IdempotencyKey: chargeKey, PaymentID: paymentID, Amount: 1500, Currency: "USD",
		PaymentMethod: "pm_card_visa", Description: "Order 1", CreatedAt: chargeCreated}
}

// TestCharge: each answer Stripe may give a charge is classified as the
// package doc says.
func TestCharge(t *testing.T) {
	t.Parallel()
	const create, retrieve = "POST /v1/payment_intents", "GET /v1/payment_intents/pi_1"
	declined := func(code, declineCode string) reply {
		return failure(http.StatusPaymentRequired, "card_error", code, map[string]any{
			"decline_code": declineCode, "message": "Your card was declined.",
			"payment_intent": rawJSON(paymentIntent("pi_1", "requires_payment_method", chargeKey, map[string]any{
				"last_payment_error": lastPaymentError(code, declineCode, "Your card was declined.")})),
		})
	}
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		outcome operation.Outcome
	}{
		{name: "Succeeded", routes: map[string][]reply{create: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}},
			outcome: operation.Outcome{ID: "pi_1", Succeeded: true}},
		{name: "Declined", routes: map[string][]reply{create: {declined("card_declined", "generic_decline")}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "generic_decline", FailureMessage: "Your card was declined."}},
		{name: "InsufficientFunds", routes: map[string][]reply{create: {declined("card_declined", "insufficient_funds")}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "insufficient_funds", FailureMessage: "Your card was declined."}},
		// A card that needs authentication, with error_on_requires_action.
		{name: "AuthenticationRequired", routes: map[string][]reply{create: {declined("authentication_required", "authentication_required")}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "authentication_required", FailureMessage: "Your card was declined."}},
		{name: "DeclinedNoDeclineCode", routes: map[string][]reply{create: {declined("expired_card", "")}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "expired_card", FailureMessage: "Your card was declined."}},
		{name: "DeclineReplayed", routes: map[string][]reply{create: {declined("card_declined", "insufficient_funds").replay()}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "insufficient_funds", FailureMessage: "Your card was declined."}},
		{name: "RequiresPaymentMethod", routes: map[string][]reply{create: {ok(paymentIntent("pi_1", "requires_payment_method", chargeKey,
			map[string]any{"last_payment_error": lastPaymentError("card_declined", "do_not_honor", "Declined.")}))}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "do_not_honor", FailureMessage: "Declined."}},
		{name: "Canceled", routes: map[string][]reply{create: {ok(paymentIntent("pi_1", "canceled", chargeKey, nil))}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "canceled"}},
		{name: "ProcessingThenSucceeded", routes: map[string][]reply{
			create:   {ok(paymentIntent("pi_1", "processing", chargeKey, nil)).replay()},
			retrieve: {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}},
			outcome: operation.Outcome{ID: "pi_1", Succeeded: true}},
		{name: "StillProcessing", want: unknown, routes: map[string][]reply{
			create:   {ok(paymentIntent("pi_1", "processing", chargeKey, nil)).replay()},
			retrieve: {ok(paymentIntent("pi_1", "processing", chargeKey, nil))}}},
		{name: "RequiresAction", want: unknown, routes: map[string][]reply{
			create:   {ok(paymentIntent("pi_1", "requires_action", chargeKey, map[string]any{"next_action": map[string]any{"type": "use_stripe_sdk"}}))},
			retrieve: {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))}}},
		{name: "RequiresPaymentMethodNoError", want: unknown, routes: map[string][]reply{
			create:   {ok(paymentIntent("pi_1", "requires_payment_method", chargeKey, nil))},
			retrieve: {ok(paymentIntent("pi_1", "requires_payment_method", chargeKey, nil))}}},
		{name: "RetrieveFails", want: unknown, routes: map[string][]reply{
			create:   {ok(paymentIntent("pi_1", "processing", chargeKey, nil))},
			retrieve: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "RefusedAmountTooSmall", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error", "amount_too_small",
			map[string]any{"param": "amount", "message": "Amount must be at least $0.50 usd"})}},
			outcome: operation.Outcome{FailureCode: "amount_too_small", FailureMessage: "Amount must be at least $0.50 usd"}},
		{name: "RefusedNoSuchPaymentMethod", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error", "resource_missing",
			map[string]any{"param": "payment_method", "message": "No such PaymentMethod: 'pm_x'"})}},
			outcome: operation.Outcome{FailureCode: "resource_missing", FailureMessage: "No such PaymentMethod: 'pm_x'"}},
		{name: "RefusedMadeIntent", routes: map[string][]reply{create: {failure(http.StatusBadRequest, "invalid_request_error",
			"payment_intent_authentication_failure", map[string]any{"message": "Authentication failed.",
				"payment_intent": rawJSON(paymentIntent("pi_1", "requires_payment_method", chargeKey, nil))})}},
			outcome: operation.Outcome{ID: "pi_1", FailureCode: "payment_intent_authentication_failure", FailureMessage: "Authentication failed."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, err := s.client(t, 5*time.Second, 0).Charge(context.Background(), chargeRequest())
			check(t, tt.want, tt.outcome, got, err)
			if n := len(s.requests(create)); n != 1 {
				t.Errorf("%d creates, want 1: stripe-go must not retry", n)
			}
		})
	}
}

// TestRateLimitedWaits: a 429 executed nothing, and the wait its
// Retry-After asks for is kept for the retry under the same key.
func TestRateLimitedWaits(t *testing.T) {
	t.Parallel()
	limited := failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)
	limited.header = map[string]string{"Retry-After": "2"}
	s := serve(t, map[string][]reply{"POST /v1/payment_intents": {limited}})
	_, err := s.client(t, 5*time.Second, 0).Charge(context.Background(), chargeRequest())
	if wait, ok := operation.RetryAfter(err); !ok || wait != 2*time.Second {
		t.Fatalf("a 429 with Retry-After: 2: %v (not sent %t, wait %s)", err, ok, wait)
	}
}

// TestChargeRequest: the charge is one confirmed PaymentIntent under the
// downstream key, its metadata naming the key and the payment.
func TestChargeRequest(t *testing.T) {
	t.Parallel()
	s := serve(t, map[string][]reply{"POST /v1/payment_intents": {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}})
	if _, err := s.client(t, 5*time.Second, 0).Charge(context.Background(), chargeRequest()); err != nil {
		t.Fatal(err)
	}
	got := s.requests("POST /v1/payment_intents")
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	if k := got[0].header.Get("Idempotency-Key"); k != chargeKey {
		t.Errorf("Idempotency-Key = %q, want %q", k, chargeKey)
	}
	if a := got[0].header.Get("Authorization"); a != "Bearer sk_test_recorded" {
		t.Errorf("Authorization = %q", a)
	}
	wantForm(t, got[0].form, map[string]string{
		"amount": "1500", "currency": "usd", "confirm": "true", "error_on_requires_action": "true", "payment_method": "pm_card_visa",
		"payment_method_types[0]": "card", "description": "Order 1",
		"metadata[downstream_key]": chargeKey, "metadata[payment_id]": paymentID,
	})
	if len(got[0].form) != 9 {
		t.Errorf("form = %v, want the 9 fields above", got[0].form)
	}
}

// TestFindCharge: the search by the key's metadata as a shortcut, then the
// list of what was created while calls could be made under the key, its
// newest match as it stands; fence PaymentIntents and other keys' are no
// match, and a search that fails or is missing is no answer.
func TestFindCharge(t *testing.T) {
	t.Parallel()
	const search, listed = "GET /v1/payment_intents/search", "GET /v1/payment_intents"
	fence := paymentIntent("pi_f", "canceled", chargeKey, map[string]any{"metadata": map[string]string{"fence": "true", "downstream_key": chargeKey}})
	none := ok(searchResult(""))
	unavailable := failure(http.StatusBadRequest, "invalid_request_error", "", map[string]any{"message": "Search is not available for your account."})
	for _, tt := range []struct {
		name    string
		routes  map[string][]reply
		want    verdict
		found   bool
		outcome operation.Outcome
		listed  int // list requests
	}{
		{name: "FoundBySearch", found: true, outcome: operation.Outcome{ID: "pi_2", Succeeded: true}, routes: map[string][]reply{
			search: {ok(searchResult("", paymentIntent("pi_1", "canceled", chargeKey, nil),
				paymentIntent("pi_2", "processing", chargeKey, map[string]any{"created": 1_700_000_500})))},
			"GET /v1/payment_intents/pi_2": {ok(paymentIntent("pi_2", "succeeded", chargeKey, nil))}}},
		{name: "SearchOnSecondPage", found: true, outcome: operation.Outcome{ID: "pi_2", FailureCode: "canceled"}, routes: map[string][]reply{
			search: {ok(searchResult("page_2", paymentIntent("pi_9", "succeeded", "charge_pay_19", nil))),
				ok(searchResult("", paymentIntent("pi_2", "canceled", chargeKey, nil)))},
			"GET /v1/payment_intents/pi_2": {ok(paymentIntent("pi_2", "canceled", chargeKey, nil))}}},
		// The search lags: the list has it, as it stands (no retrieval).
		{name: "SearchLagsListed", found: true, listed: 2, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			search: {none},
			listed: {ok(list("/v1/payment_intents", true, paymentIntent("pi_9", "succeeded", "charge_pay_19", nil), fence)),
				ok(list("/v1/payment_intents", false, paymentIntent("pi_1", "succeeded", chargeKey, nil)))}}},
		{name: "ListedNotFinal", want: unknown, listed: 1, routes: map[string][]reply{search: {none},
			listed: {ok(list("/v1/payment_intents", false, paymentIntent("pi_1", "processing", chargeKey, nil)))}}},
		// No search on the account (India's): the list decides.
		{name: "NoSearchListed", found: true, listed: 1, outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, routes: map[string][]reply{
			search: {unavailable},
			listed: {ok(list("/v1/payment_intents", false, paymentIntent("pi_1", "succeeded", chargeKey, nil)))}}},
		// None: the window around the creation listed; the rest is the
		// close's to list.
		{name: "None", listed: 1, routes: map[string][]reply{search: {none}, listed: {ok(list("/v1/payment_intents", false))}}},
		{name: "FenceIgnored", listed: 1, routes: map[string][]reply{search: {ok(searchResult("", fence))}, listed: {ok(list("/v1/payment_intents", false, fence))}}},
		{name: "OtherKeyIgnored", listed: 1, routes: map[string][]reply{search: {none},
			listed: {ok(list("/v1/payment_intents", false, paymentIntent("pi_9", "succeeded", "charge_pay_10", nil)))}}},
		{name: "NotFinal", want: unknown, routes: map[string][]reply{
			search:                         {ok(searchResult("", paymentIntent("pi_1", "succeeded", chargeKey, nil)))},
			"GET /v1/payment_intents/pi_1": {ok(paymentIntent("pi_1", "requires_action", chargeKey, nil))}}},
		{name: "ListFails", want: unknown, listed: 1, routes: map[string][]reply{search: {none},
			listed: {failure(http.StatusInternalServerError, "api_error", "", nil)}}},
		{name: "RateLimited", want: unknown, listed: 1, routes: map[string][]reply{search: {failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)},
			listed: {failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)}}},
		{name: "NotAList", want: unknown, listed: 1, routes: map[string][]reply{search: {none}, listed: {ok(`{"object":"list","has_more":false}`)}}},
		{name: "MoreWithoutIntents", want: unknown, listed: 1, routes: map[string][]reply{search: {none}, listed: {ok(list("/v1/payment_intents", true))}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, tt.routes)
			got, found, err := s.client(t, 5*time.Second, 0).FindCharge(context.Background(), chargeRequest())
			check(t, tt.want, tt.outcome, got, err)
			if found != tt.found {
				t.Errorf("found = %v, want %v", found, tt.found)
			}
			reqs := s.requests(search)
			wantForm(t, reqs[0].form, map[string]string{"query": "metadata['downstream_key']:'charge_pay_1'", "limit": "100"})
			lists := s.requests(listed)
			if len(lists) != tt.listed {
				t.Fatalf("%d list requests, want %d", len(lists), tt.listed)
			}
			// Half a minute either side of the charge's creation.
			if len(lists) > 0 {
				wantForm(t, lists[0].form, map[string]string{"limit": "100", "created[gte]": "1699999970", "created[lte]": "1700000030"})
			}
			if tt.name == "SearchLagsListed" {
				wantForm(t, lists[1].form, map[string]string{"starting_after": "pi_f", "created[gte]": "1699999970"})
			}
		})
	}
}

// TestAmounts: the API's ISO 4217 minor units are Stripe's but for ISK and
// MGA, converted both ways; Stripe's rules per currency are declared for
// the API to check.
func TestAmounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		currency     string
		amount, sent int64
	}{
		{"USD", 1500, 1500}, {"JPY", 500, 500}, {"KWD", 1010, 1010}, {"ISK", 5, 500}, {"MGA", 1500, 15},
	} {
		s := serve(t, map[string][]reply{"POST /v1/payment_intents": {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))}})
		req := chargeRequest()
		req.Amount, req.Currency = c.amount, c.currency
		if _, err := s.client(t, 5*time.Second, 0).Charge(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got := s.requests("POST /v1/payment_intents")[0].form.Get("amount"); got != strconv.FormatInt(c.sent, 10) {
			t.Errorf("%d %s sent as %s, want %d", c.amount, c.currency, got, c.sent)
		}
		// The ledger reads Stripe's amount back in ISO minor units.
		l := serve(t, map[string][]reply{"GET /v1/payment_intents": {ok(list("/v1/payment_intents", false,
			paymentIntent("pi_1", "succeeded", chargeKey, map[string]any{"amount": c.sent, "currency": strings.ToLower(c.currency)})))}})
		page, _, err := l.client(t, 5*time.Second, 0).LedgerCharges(context.Background(), time.Unix(1_699_999_000, 0), "")
		if err != nil || len(page) != 1 || page[0].Amount != c.amount || page[0].Currency != c.currency {
			t.Errorf("%s ledger = %+v, %v; want %d", c.currency, page, err, c.amount)
		}
	}
	declared := (&stripe.Settings{}).Processor()
	for _, c := range []struct {
		currency  string
		min, step int64
	}{
		{"USD", 50, 1}, {"eur", 50, 1}, {"GBP", 30, 1}, {"JPY", 50, 1}, {"HUF", 17500, 1}, {"CZK", 1500, 1},
		{"BHD", 1, 10}, {"JOD", 1, 10}, {"KWD", 1, 10}, {"OMR", 1, 10}, {"TND", 1, 10}, {"MGA", 1, 100}, {"ISK", 1, 1},
	} {
		if got := declared.Amounts(strings.ToUpper(c.currency)); got.Min != c.min || got.Step != c.step {
			t.Errorf("%s: %+v, want min %d step %d", c.currency, got, c.min, c.step)
		}
	}
	if e := declared.CheckAmount("usd", 49, true); e == nil || e.Field != "amount" {
		t.Errorf("49 cents: %v", e)
	}
	if e := declared.CheckAmount("usd", 1, false); e != nil {
		t.Errorf("a refund of 1 cent: %v, want taken (no minimum)", e)
	}
	if e := declared.CheckAmount("kwd", 15, false); e == nil {
		t.Error("a refund of 15 fils: taken, want a multiple of 10")
	}
}

// TestCreateUnknown: an answer that says nothing definite is unknown (a
// 429 not sent, too) for a charge and a refund alike, each made once:
// stripe-go must not retry.
func TestCreateUnknown(t *testing.T) {
	t.Parallel()
	creates := []struct {
		name, route string
		make        func(*stripe.Client) (operation.Outcome, error)
	}{
		{"Charge", "POST /v1/payment_intents", func(c *stripe.Client) (operation.Outcome, error) {
			return c.Charge(context.Background(), chargeRequest())
		}},
		{"Refund", "POST /v1/refunds", func(c *stripe.Client) (operation.Outcome, error) {
			return c.Refund(context.Background(), refundRequest())
		}},
	}
	for _, tt := range []struct {
		name    string
		rep     reply
		timeout time.Duration
		want    verdict
	}{
		{name: "IdempotencyError", want: unknown, rep: failure(http.StatusBadRequest, "idempotency_error", "",
			map[string]any{"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."})},
		{name: "KeyInUse", want: unknown, rep: failure(http.StatusConflict, "idempotency_error", "idempotency_key_in_use", nil)},
		{name: "LockTimeout", want: unknown, rep: failure(http.StatusConflict, "invalid_request_error", "lock_timeout", nil)},
		{name: "RateLimited", want: notSent, rep: failure(http.StatusTooManyRequests, "invalid_request_error", "rate_limit", nil)},
		{name: "ServerError", want: unknown, rep: failure(http.StatusInternalServerError, "api_error", "", nil)},
		{name: "SavedServerError", want: unknown, rep: savedServerError()},
		{name: "BadGateway", want: unknown, rep: reply{status: http.StatusBadGateway, body: "<html>Bad Gateway</html>"}},
		{name: "Unauthorized", want: unknown, rep: failure(http.StatusUnauthorized, "invalid_request_error", "", nil)},
		{name: "Forbidden", want: unknown, rep: failure(http.StatusForbidden, "invalid_request_error", "secret_key_required", nil)},
		{name: "CardErrorNoIntent", want: unknown, rep: failure(http.StatusPaymentRequired, "card_error", "card_declined", nil)},
		{name: "NotAnError", want: unknown, rep: reply{status: http.StatusBadRequest, body: `{"message":"bad"}`}},
		{name: "UnreadableSuccess", want: unknown, rep: ok(`{"id":"pi_1","status":`)},
		{name: "EmptySuccess", want: unknown, rep: ok(`{}`)},
		{name: "Timeout", want: unknown, timeout: 200 * time.Millisecond, rep: reply{hang: true}},
		{name: "Dropped", want: unknown, rep: reply{drop: true}},
	} {
		for _, create := range creates {
			t.Run(create.name+tt.name, func(t *testing.T) {
				t.Parallel()
				timeout := tt.timeout
				if timeout == 0 {
					timeout = 5 * time.Second
				}
				s := serve(t, map[string][]reply{create.route: {tt.rep}})
				got, err := create.make(s.client(t, timeout, 0))
				check(t, tt.want, operation.Outcome{}, got, err)
				if n := len(s.requests(create.route)); n != 1 {
					t.Errorf("%d creates, want 1: stripe-go must not retry", n)
				}
			})
		}
	}
}

// TestSavedFailure: a 5xx Stripe replays for the key (Idempotent-Replayed)
// is a saved failure, for a charge and a refund alike; a 5xx answered
// fresh is only unknown.
func TestSavedFailure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		rep   reply
		saved bool
	}{
		{"Replayed", savedServerError(), true},
		{"Fresh", failure(http.StatusInternalServerError, "api_error", "", nil), false},
		{"ReplayedRefusal", failure(http.StatusBadRequest, "invalid_request_error", "amount_too_small", nil).replay(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, map[string][]reply{"POST /v1/payment_intents": {tt.rep}, "POST /v1/refunds": {tt.rep}})
			c := s.client(t, 5*time.Second, 0)
			_, charged := c.Charge(context.Background(), chargeRequest())
			_, refunded := c.Refund(context.Background(), refundRequest())
			for name, err := range map[string]error{"charge": charged, "refund": refunded} {
				if errors.Is(err, operation.ErrSavedFailure) != tt.saved || tt.saved && !errors.Is(err, operation.ErrProcessorUnknown) {
					t.Errorf("%s: %v, want saved %t", name, err, tt.saved)
				}
			}
		})
	}
}
