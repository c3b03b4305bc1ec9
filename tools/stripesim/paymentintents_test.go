package stripesim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// TestCards: each test card, confirmed as the adapter confirms a charge,
// answers as the package doc says, and leaves its PaymentIntent so.
func TestCards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method string
		// onAction is error_on_requires_action.
		onAction bool
		// status is the PaymentIntent's, answered or carried by the error.
		status stripego.PaymentIntentStatus
		// code and decline are the 402's; "" for a 200.
		code    stripego.ErrorCode
		decline stripego.DeclineCode
	}{
		{"Visa", "pm_card_visa", true, stripego.PaymentIntentStatusSucceeded, "", ""},
		{"Unlisted", "pm_card_mastercard", true, stripego.PaymentIntentStatusSucceeded, "", ""},
		{"Declined", "pm_card_chargeDeclined", true, stripego.PaymentIntentStatusRequiresPaymentMethod,
			stripego.ErrorCodeCardDeclined, "generic_decline"},
		{"InsufficientFunds", "pm_card_insufficientFunds", true, stripego.PaymentIntentStatusRequiresPaymentMethod,
			stripego.ErrorCodeCardDeclined, "insufficient_funds"},
		{"AuthenticationDeclined", "pm_card_authenticationRequired", true, stripego.PaymentIntentStatusRequiresPaymentMethod,
			stripego.ErrorCodeAuthenticationRequired, "authentication_required"},
		{"AuthenticationRequired", "pm_card_authenticationRequired", false, stripego.PaymentIntentStatusRequiresAction, "", ""},
		{"Processing", "pm_card_processing", true, stripego.PaymentIntentStatusProcessing, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, stripesim.Options{ManualClock: true})
			params := charge(1500, tc.method, "key-"+tc.name)
			params.ErrorOnRequiresAction = stripego.Bool(tc.onAction)
			params.Description = stripego.String("order " + tc.name)
			pi, err := e.create(context.Background(), params)
			if tc.code != "" {
				se := wantError(t, err, http.StatusPaymentRequired, stripego.ErrorTypeCard, tc.code)
				if se.DeclineCode != tc.decline {
					t.Errorf("decline_code %q; want %q", se.DeclineCode, tc.decline)
				}
				pi = se.PaymentIntent
				if pi == nil || pi.LastPaymentError == nil || pi.LastPaymentError.DeclineCode != tc.decline {
					t.Fatalf("the error carries payment intent %+v; want one with the decline as last_payment_error", pi)
				}
			} else if err != nil {
				t.Fatalf("create: %v", err)
			}
			if pi.Status != tc.status || pi.Amount != 1500 || pi.Currency != "usd" || pi.Object != "payment_intent" {
				t.Errorf("payment intent %s %d %s (%s); want %s 1500 usd", pi.Status, pi.Amount, pi.Currency, pi.Object, tc.status)
			}
			if pi.Metadata["downstream_key"] != "key-"+tc.name || pi.Description != "order "+tc.name {
				t.Errorf("metadata %v, description %q; want what was sent", pi.Metadata, pi.Description)
			}
			made := e.sim.PaymentIntents()
			if len(made) != 1 || made[0].ID != pi.ID || string(made[0].Status) != string(tc.status) {
				t.Errorf("the simulator holds %+v; want %s %s", made, pi.ID, tc.status)
			}
			got, err := e.api.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil)
			if err != nil || got.Status != tc.status {
				t.Errorf("retrieve = %v, %v; want %s", got, err, tc.status)
			}
		})
	}
}

// TestProcessing: a processing PaymentIntent succeeds ProcessingFor later,
// as the next read finds it.
func TestProcessing(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true, ProcessingFor: 5 * time.Second})
	pi := e.mustCreate(t, charge(1500, "pm_card_processing", "key-processing"))
	e.sim.Advance(5*time.Second - time.Millisecond)
	if got, err := e.api.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil); err != nil || got.Status != stripego.PaymentIntentStatusProcessing {
		t.Fatalf("before ProcessingFor, retrieve = %v, %v; want processing", got, err)
	}
	e.sim.Advance(time.Millisecond)
	got, err := e.api.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil)
	if err != nil || got.Status != stripego.PaymentIntentStatusSucceeded || got.AmountReceived != 1500 {
		t.Errorf("after ProcessingFor, retrieve = %v, %v; want succeeded", got, err)
	}
	// The real clock moves it too, settled by the ticks.
	real := start(t, stripesim.Options{ProcessingFor: 50 * time.Millisecond})
	pi = real.mustCreate(t, charge(1500, "pm_card_processing", "key-real"))
	waitFor(t, "the processing payment intent to succeed", func() bool {
		return real.sim.PaymentIntents()[0].Status == stripesim.StatusSucceeded
	})
}

// TestCreateRefusals: a payment method or an amount Stripe refuses is a 400
// that makes nothing.
func TestCreateRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		amount   int64
		currency string
		method   string
		// code and param are the 400's; "" param for a success.
		code  stripego.ErrorCode
		param string
	}{
		{"UsdMinimum", 50, "usd", "pm_card_visa", "", ""},
		{"UsdTooSmall", 49, "usd", "pm_card_visa", stripego.ErrorCodeAmountTooSmall, "amount"},
		{"GbpMinimum", 30, "gbp", "pm_card_visa", "", ""},
		{"GbpTooSmall", 29, "gbp", "pm_card_visa", stripego.ErrorCodeAmountTooSmall, "amount"},
		{"JpyTooSmall", 49, "jpy", "pm_card_visa", stripego.ErrorCodeAmountTooSmall, "amount"},
		{"HkdTooSmall", 399, "hkd", "pm_card_visa", stripego.ErrorCodeAmountTooSmall, "amount"},
		{"UnlistedMinimum", 50, "krw", "pm_card_visa", "", ""},
		{"TooLarge", 100000000, "usd", "pm_card_visa", stripego.ErrorCodeAmountTooLarge, "amount"},
		{"Largest", 99999999, "usd", "pm_card_visa", "", ""},
		{"ThreeDecimalUnrounded", 1005, "kwd", "pm_card_visa", "", "amount"},
		{"ThreeDecimalRounded", 1010, "kwd", "pm_card_visa", "", ""},
		{"Currency", 1000, "dollars", "pm_card_visa", "", "currency"},
		{"NoSuchMethod", 1000, "usd", "card_visa", stripego.ErrorCodeResourceMissing, "payment_method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, stripesim.Options{ManualClock: true})
			params := charge(tc.amount, tc.method, "key-"+tc.name)
			params.Currency = stripego.String(tc.currency)
			_, err := e.create(context.Background(), params)
			if tc.param == "" {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				return
			}
			se := wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, tc.code)
			if se.Param != tc.param {
				t.Errorf("param %q; want %q", se.Param, tc.param)
			}
			if n := len(e.sim.PaymentIntents()); n != 0 {
				t.Errorf("%d payment intents made; want none", n)
			}
		})
	}
}

// TestUnconfirmed: without confirm a PaymentIntent waits for a payment
// method, or for its confirmation.
func TestUnconfirmed(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true})
	if pi := e.mustCreate(t, fence()); pi.Status != stripego.PaymentIntentStatusRequiresPaymentMethod || pi.LastPaymentError != nil {
		t.Errorf("without a payment method: %s; want requires_payment_method, no error", pi.Status)
	}
	withMethod := charge(1000, "pm_card_visa", "")
	withMethod.Confirm = stripego.Bool(false)
	if pi := e.mustCreate(t, withMethod); pi.Status != stripego.PaymentIntentStatusRequiresConfirmation {
		t.Errorf("with a payment method: %s; want requires_confirmation", pi.Status)
	}
}

// TestCancel: a PaymentIntent is canceled from requires_*, and refused
// with payment_intent_unexpected_state, carrying it, once canceled,
// succeeded or processing.
func TestCancel(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true})
	ctx := context.Background()
	pi := e.mustCreate(t, fence())
	canceled, err := e.api.V1PaymentIntents.Cancel(ctx, pi.ID, nil)
	if err != nil || canceled.Status != stripego.PaymentIntentStatusCanceled || canceled.CanceledAt == 0 {
		t.Fatalf("cancel = %v, %v; want canceled", canceled, err)
	}
	for _, id := range []string{pi.ID, e.mustCreate(t, charge(1000, "pm_card_visa", "")).ID,
		e.mustCreate(t, charge(1000, "pm_card_processing", "")).ID} {
		before, _ := e.api.V1PaymentIntents.Retrieve(ctx, id, nil)
		_, err := e.api.V1PaymentIntents.Cancel(ctx, id, nil)
		se := wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodePaymentIntentUnexpectedState)
		if se.PaymentIntent == nil || se.PaymentIntent.ID != id || se.PaymentIntent.Status != before.Status {
			t.Errorf("the refusal carries %+v; want %s %s", se.PaymentIntent, id, before.Status)
		}
	}
	_, err = e.api.V1PaymentIntents.Cancel(ctx, "pi_missing", nil)
	wantError(t, err, http.StatusNotFound, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing)
}

// TestRequests: what every request meets: a key, known parameters, a known
// URL, a Request-Id.
func TestRequests(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true})
	do := func(method, path, key string, form url.Values) (int, http.Header, map[string]map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, e.url+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var v map[string]map[string]any
		_ = json.Unmarshal(body, &v)
		return resp.StatusCode, resp.Header, v
	}
	for _, tc := range []struct {
		name, method, path, key string
		form                    url.Values
		status                  int
		code                    string
	}{
		{"NoKey", "GET", "/v1/payment_intents", "", nil, 401, ""},
		{"PublishableKey", "GET", "/v1/payment_intents", "pk_test_x", nil, 401, ""},
		{"UnknownParameter", "POST", "/v1/payment_intents", apiKey,
			url.Values{"amount": {"1000"}, "currency": {"usd"}, "amount_cents": {"1000"}}, 400, "parameter_unknown"},
		{"MissingParameter", "POST", "/v1/payment_intents", apiKey, url.Values{"currency": {"usd"}}, 400, "parameter_missing"},
		{"UnknownURL", "GET", "/v1/charges/ch_1", apiKey, nil, 404, ""},
		{"Limit", "GET", "/v1/payment_intents?limit=101", apiKey, nil, 400, ""},
		{"BothCursors", "GET", "/v1/refunds?starting_after=re_1&ending_before=re_2", apiKey, nil, 400, "parameters_exclusive"},
		{"NoSuchCursor", "GET", "/v1/refunds?starting_after=re_1", apiKey, nil, 400, "resource_missing"},
	} {
		status, header, body := do(tc.method, tc.path, tc.key, tc.form)
		if status != tc.status || body["error"]["type"] != "invalid_request_error" || (tc.code != "" && body["error"]["code"] != tc.code) {
			t.Errorf("%s: %d %v; want %d invalid_request_error %q", tc.name, status, body, tc.status, tc.code)
		}
		if !strings.HasPrefix(header.Get("Request-Id"), "req_") {
			t.Errorf("%s: Request-Id %q", tc.name, header.Get("Request-Id"))
		}
	}
}
