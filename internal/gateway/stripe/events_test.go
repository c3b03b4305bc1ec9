package stripe_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
)

// eventBody is a Stripe event of type about the JSON object.
func eventBody(typ, obj string) string {
	return object(map[string]any{"id": "evt_1", "object": "event", "api_version": "2020-08-27", "created": 1_700_000_000,
		"livemode": false, "pending_webhooks": 1, "request": map[string]any{"id": nil, "idempotency_key": nil}, "type": typ,
		"data": map[string]any{"object": rawJSON(obj)}}, nil)
}

// signed is the headers of body signed with secret at, as Stripe signs.
func signed(body []byte, secret string, at time.Time) http.Header {
	p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	return http.Header{stripe.SignatureHeader: {p.Header}}
}

// TestVerify: a webhook signed with one of the secrets, within the
// tolerance of now, verifies; anything else is ErrSignature.
func TestVerify(t *testing.T) {
	t.Parallel()
	const secret, old = "whsec_current", "whsec_previous"
	body := []byte(eventBody("payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, nil)))
	// Signed long ago, and verified at the now it is given: the wall clock
	// is not read.
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	now := at.Add(time.Minute)
	twoSignatures := signed(body, old, at)
	twoSignatures.Set(stripe.SignatureHeader, twoSignatures.Get(stripe.SignatureHeader)+",v1="+
		hex.EncodeToString(webhook.ComputeSignature(at, body, secret)))

	for _, tt := range []struct {
		name    string
		body    []byte
		header  http.Header
		secrets []string
		ok      bool
		// stale: refused as signed outside the tolerance, which only a
		// correct signature is called.
		stale bool
	}{
		{name: "OK", body: body, header: signed(body, secret, at), secrets: []string{secret}, ok: true},
		{name: "RotationNew", body: body, header: signed(body, secret, at), secrets: []string{old, secret}, ok: true},
		{name: "RotationOld", body: body, header: signed(body, old, at), secrets: []string{old, secret}, ok: true},
		{name: "TwoSignatures", body: body, header: twoSignatures, secrets: []string{secret}, ok: true},
		{name: "JustInTolerance", body: body, header: signed(body, secret, now.Add(-stripe.SignatureTolerance)), secrets: []string{secret}, ok: true},
		{name: "Tampered", body: append([]byte{' '}, body...), header: signed(body, secret, at), secrets: []string{secret}},
		{name: "WrongSecret", body: body, header: signed(body, "whsec_other", at), secrets: []string{secret, old}},
		{name: "Stale", body: body, header: signed(body, secret, now.Add(-10*time.Minute)), secrets: []string{secret}, stale: true},
		{name: "Ahead", body: body, header: signed(body, secret, now.Add(10*time.Minute)), secrets: []string{secret}, stale: true},
		{name: "StaleForged", body: body, header: signed(body, "whsec_other", now.Add(-10*time.Minute)), secrets: []string{secret}},
		{name: "NoHeader", body: body, header: http.Header{}, secrets: []string{secret}},
		{name: "NoTime", body: body, header: http.Header{stripe.SignatureHeader: {"v1=abc"}}, secrets: []string{secret}},
		{name: "Garbage", body: body, header: http.Header{stripe.SignatureHeader: {"garbage"}}, secrets: []string{secret}},
		{name: "NoSecrets", body: body, header: signed(body, secret, at)},
		{name: "EmptySecret", body: body, header: signed(body, "", at), secrets: []string{""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := stripe.Verify(tt.body, tt.header, tt.secrets, now)
			switch {
			case tt.ok && err != nil:
				t.Errorf("refused: %v", err)
			case !tt.ok && !errors.Is(err, stripe.ErrSignature):
				t.Errorf("err = %v, want ErrSignature", err)
			case errors.Is(err, stripe.ErrStale) != tt.stale:
				t.Errorf("err = %v, stale %t", err, tt.stale)
			}
		})
	}
}

// TestVerifyThenParse: a webhook as Stripe sends it, signed, verifies on its
// raw bytes and parses.
func TestVerifyThenParse(t *testing.T) {
	t.Parallel()
	body := []byte(eventBody("payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, nil)))
	now := time.Now()
	if err := stripe.Verify(body, signed(body, "whsec_test", now), []string{"whsec_test"}, now); err != nil {
		t.Fatal(err)
	}
	ev, err := stripe.ParseEvent(body)
	if err != nil || ev.DownstreamKey != chargeKey || ev.Outcome != (operation.Outcome{ID: "pi_1", Succeeded: true}) {
		t.Fatalf("ParseEvent = %+v, %v", ev, err)
	}
}

// TestParseEvent: the events that settle an operation, and the rest.
func TestParseEvent(t *testing.T) {
	t.Parallel()
	declined := paymentIntent("pi_1", "requires_payment_method", chargeKey, map[string]any{
		"last_payment_error": lastPaymentError("card_declined", "insufficient_funds", "Your card has insufficient funds.")})
	fence := paymentIntent("pi_f", "canceled", chargeKey, map[string]any{"metadata": map[string]string{"fence": "true", "downstream_key": chargeKey}})
	for _, tt := range []struct {
		typ, obj string
		want     operation.ProcessorEvent
	}{
		{"payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, nil), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, DownstreamKey: chargeKey, Amount: 1500, Currency: "USD"}},
		{"payment_intent.payment_failed", declined, operation.ProcessorEvent{Outcome: operation.Outcome{ID: "pi_1",
			FailureCode: "insufficient_funds", FailureMessage: "Your card has insufficient funds."}, DownstreamKey: chargeKey, Amount: 1500, Currency: "USD"}},
		{"payment_intent.payment_failed", paymentIntent("pi_1", "requires_payment_method", chargeKey, map[string]any{
			"last_payment_error": lastPaymentError("expired_card", "", "Expired.")}), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "pi_1", FailureCode: "expired_card", FailureMessage: "Expired."}, DownstreamKey: chargeKey,
			Amount: 1500, Currency: "USD"}},
		{"payment_intent.canceled", paymentIntent("pi_1", "canceled", chargeKey, nil), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "pi_1", FailureCode: "canceled"}, DownstreamKey: chargeKey, Amount: 1500, Currency: "USD"}},
		{"refund.created", refund("re_1", "succeeded", refundKey, nil), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "re_1", Succeeded: true}, DownstreamKey: refundKey, Amount: 500, Currency: "USD"}},
		{"refund.updated", refund("re_1", "failed", refundKey, map[string]any{"failure_reason": "lost_or_stolen_card"}), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "re_1", FailureCode: "lost_or_stolen_card"}, DownstreamKey: refundKey, Amount: 500, Currency: "USD"}},
		{"refund.failed", refund("re_1", "failed", refundKey, map[string]any{"failure_reason": "expired_or_canceled_card"}), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "re_1", FailureCode: "expired_or_canceled_card"}, DownstreamKey: refundKey, Amount: 500, Currency: "USD"}},
		{"charge.refund.updated", refund("re_1", "canceled", refundKey, nil), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "re_1", FailureCode: "canceled"}, DownstreamKey: refundKey, Amount: 500, Currency: "USD"}},
		// API versions before 2022-11-15 embed the charge's refunds, newest
		// first: the newest made by this service settles.
		{"charge.refunded", object(map[string]any{"id": "ch_1", "object": "charge", "refunded": true, "currency": "usd",
			"refunds": map[string]any{"object": "list", "has_more": false, "data": []json.RawMessage{
				rawJSON(refund("re_9", "succeeded", "", map[string]any{"metadata": map[string]string{}})),
				rawJSON(refund("re_1", "succeeded", refundKey, nil))}}}, nil), operation.ProcessorEvent{
			Outcome: operation.Outcome{ID: "re_1", Succeeded: true}, DownstreamKey: refundKey, Amount: 500, Currency: "USD"}},
		// ISK: two decimals at Stripe, none in ISO 4217.
		{"payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, map[string]any{"currency": "isk", "amount": 50000}),
			operation.ProcessorEvent{Outcome: operation.Outcome{ID: "pi_1", Succeeded: true}, DownstreamKey: chargeKey, Amount: 500, Currency: "ISK"}},
	} {
		body := eventBody(tt.typ, tt.obj)
		got, err := stripe.ParseEvent([]byte(body))
		if err != nil {
			t.Errorf("%s: %v", tt.typ, err)
			continue
		}
		if string(got.Payload) != body {
			t.Errorf("%s: payload = %s", tt.typ, got.Payload)
		}
		tt.want.ID, tt.want.Type, got.Payload = "evt_1", tt.typ, nil
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.typ, got, tt.want)
		}
	}

	for _, body := range []string{
		eventBody("refund.created", refund("re_1", "pending", refundKey, nil)),
		eventBody("refund.updated", refund("re_1", "requires_action", refundKey, nil)),
		eventBody("payment_intent.canceled", fence),
		// Later API versions embed no refunds: their refund.* events settle.
		eventBody("charge.refunded", `{"id":"ch_1","object":"charge","refunded":true}`),
		eventBody("payment_intent.processing", paymentIntent("pi_1", "processing", chargeKey, nil)),
		eventBody("customer.created", `{"id":"cus_1","object":"customer"}`),
		`{"id":"evt_1","object":"event","type":"customer.created","data":{}}`,
		// Objects this service did not make: their metadata names no key.
		eventBody("payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, map[string]any{"metadata": map[string]string{}})),
		eventBody("refund.updated", refund("re_1", "succeeded", "", map[string]any{"metadata": nil})),
		eventBody("refund.created", refund("re_1", "succeeded", "", map[string]any{"metadata": map[string]string{"order": "42"}})),
	} {
		if _, err := stripe.ParseEvent([]byte(body)); !errors.Is(err, operation.ErrEventNotHandled) {
			t.Errorf("%s: %v, want ErrEventNotHandled", body, err)
		}
	}

	for _, body := range []string{
		`not json`,
		`{"id":"evt_1","type":"payment_intent.succeeded"}`,
		eventBody("payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, nil))[:40],
		object(map[string]any{"object": "event", "type": "payment_intent.succeeded",
			"data": map[string]any{"object": rawJSON(paymentIntent("pi_1", "succeeded", chargeKey, nil))}}, nil),
		eventBody("payment_intent.succeeded", paymentIntent("pi_1", "processing", chargeKey, nil)),
		eventBody("payment_intent.canceled", paymentIntent("pi_1", "succeeded", chargeKey, nil)),
		eventBody("payment_intent.payment_failed", paymentIntent("pi_1", "succeeded", chargeKey, nil)),
		eventBody("payment_intent.succeeded", refund("re_1", "succeeded", refundKey, nil)),
		eventBody("refund.updated", paymentIntent("pi_1", "succeeded", chargeKey, nil)),
		eventBody("refund.updated", `"re_1"`),
	} {
		if _, err := stripe.ParseEvent([]byte(body)); !errors.Is(err, operation.ErrEventMalformed) {
			t.Errorf("%s: %v, want ErrEventMalformed", body, err)
		}
	}
}
