package fake_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/operation"
)

func TestParseEvent(t *testing.T) {
	t.Parallel()
	charge := func(typ, status, extra string) string {
		return `{"id":"evt_1","type":"` + typ + `","created":1,"data":{"object":{"id":"ch_1","object":"charge","amount":1500,` +
			`"currency":"USD","status":"` + status + `","idempotency_key":"charge_pay_1"` + extra + `}}}`
	}
	refund := func(typ, id, status, extra string) string {
		return `{"id":"evt_2","type":"` + typ + `","created":1,"data":{"object":{"id":` + id + `,"object":"refund","charge":"ch_1",` +
			`"amount":400,"status":"` + status + `","idempotency_key":"refund_re_1"` + extra + `}}}`
	}
	for _, c := range []struct {
		body string
		want operation.ProcessorEvent
	}{
		{charge("charge.succeeded", "succeeded", ""), operation.ProcessorEvent{ID: "evt_1", Type: "charge.succeeded",
			DownstreamKey: "charge_pay_1", Outcome: operation.Outcome{ID: "ch_1", Succeeded: true}, Amount: 1500, Currency: "USD"}},
		{charge("charge.failed", "failed", `,"failure_code":"card_declined","failure_message":"Declined."`), operation.ProcessorEvent{
			ID: "evt_1", Type: "charge.failed", DownstreamKey: "charge_pay_1",
			Outcome: operation.Outcome{ID: "ch_1", FailureCode: "card_declined", FailureMessage: "Declined."}, Amount: 1500, Currency: "USD"}},
		{refund("refund.succeeded", `"re_1"`, "succeeded", ""), operation.ProcessorEvent{ID: "evt_2", Type: "refund.succeeded",
			DownstreamKey: "refund_re_1", Outcome: operation.Outcome{ID: "re_1", Succeeded: true}, Amount: 400}},
		{refund("refund.failed", "null", "failed", `,"failure_code":"charge_not_refundable"`), operation.ProcessorEvent{ID: "evt_2",
			Type: "refund.failed", DownstreamKey: "refund_re_1", Outcome: operation.Outcome{FailureCode: "charge_not_refundable"}, Amount: 400}},
	} {
		got, err := fake.ParseEvent([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if string(got.Payload) != c.body {
			t.Errorf("payload = %s", got.Payload)
		}
		got.Payload = nil
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseEvent(%s)\n= %+v\nwant %+v", c.body, got, c.want)
		}
	}

	if _, err := fake.ParseEvent([]byte(`{"id":"evt_3","type":"charge.dispute.created","data":{}}`)); !errors.Is(err, operation.ErrEventNotHandled) {
		t.Errorf("unhandled type: %v", err)
	}
	for _, body := range []string{
		`not json`,
		`{"type":"charge.succeeded"}`,
		charge("charge.succeeded", "failed", ""),
		charge("charge.failed", "succeeded", ""),
		`{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1","object":"charge","amount":1,"status":"succeeded"}}}`,
		`{"id":"evt_1","type":"refund.succeeded","data":{"object":{"id":"ch_1","object":"charge","status":"succeeded","idempotency_key":"k"}}}`,
	} {
		if _, err := fake.ParseEvent([]byte(body)); !errors.Is(err, operation.ErrEventMalformed) {
			t.Errorf("ParseEvent(%s) = %v, want malformed", body, err)
		}
	}
}

// TestParseEventOfAnyKind: an event about an object of any name settles like
// a charge's, named by its downstream key; nothing reads one object as
// another kind's, and no table of types stands between a new kind and its
// events.
func TestParseEventOfAnyKind(t *testing.T) {
	t.Parallel()
	body := `{"id":"evt_9","type":"payout.succeeded","created":1,"data":{"object":{"id":"po_1","object":"payout",` +
		`"amount":700,"currency":"EUR","status":"succeeded","idempotency_key":"payout_po_2"}}}`
	got, err := fake.ParseEvent([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := operation.ProcessorEvent{ID: "evt_9", Type: "payout.succeeded", DownstreamKey: "payout_po_2",
		Outcome: operation.Outcome{ID: "po_1", Succeeded: true}, Amount: 700, Currency: "EUR", Payload: []byte(body)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseEvent = %+v, want %+v", got, want)
	}
	// The object must be what the type says it is.
	mismatch := `{"id":"evt_9","type":"payout.failed","data":{"object":{"id":"re_1","object":"refund","status":"failed",` +
		`"idempotency_key":"payout_po_2"}}}`
	if _, err := fake.ParseEvent([]byte(mismatch)); !errors.Is(err, operation.ErrEventMalformed) {
		t.Errorf("a payout event about a refund: %v, want malformed", err)
	}
}
