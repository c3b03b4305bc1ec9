package fakeprocessor_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/tools/fakeprocessor"
)

func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	e, r := newWebhookEnv(t, nil, nil)

	t.Run("ChargeSucceeded", func(t *testing.T) {
		t.Parallel()
		resp := e.postOK(t, "/v1/charges", "wh-visa", `{"amount":1234,"currency":"usd","payment_method":"pm_card_visa","payment_id":"pay_1","description":"order 7"}`)
		ev := onlyDelivery(t, e, r, "wh-visa", "charge.succeeded")
		sameJSON(t, ev.Data.Object, e.get("/v1/charges/"+decode[fakeprocessor.Charge](t, resp).ID).body)
		sameJSON(t, ev.Data.Object, resp.body)
	})
	t.Run("ChargeFailed", func(t *testing.T) {
		t.Parallel()
		resp := e.post("/v1/charges", "wh-declined", `{"amount":1234,"currency":"USD","payment_method":"pm_card_insufficient_funds"}`)
		if resp.status != http.StatusPaymentRequired {
			t.Fatalf("charge: %d %s", resp.status, resp.body)
		}
		ev := onlyDelivery(t, e, r, "wh-declined", "charge.failed")
		sameJSON(t, ev.Data.Object, e.get("/v1/charges/"+decodeError(t, resp).Charge).body)
	})
	t.Run("RefundSucceeded", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("wh-refunded-charge", "pm_card_visa")
		resp := e.post("/v1/refunds", "wh-refund", `{"charge":"`+ch+`","amount":300}`)
		if resp.status != http.StatusOK || bytes.Contains(resp.body, []byte("failure_code")) {
			t.Fatalf("refund: %d %s", resp.status, resp.body)
		}
		ev := onlyDelivery(t, e, r, "wh-refund", "refund.succeeded")
		listed := decode[struct {
			Data []json.RawMessage `json:"data"`
		}](t, e.get("/v1/refunds?idempotency_key=wh-refund"))
		if len(listed.Data) != 1 {
			t.Fatalf("listed %d refunds", len(listed.Data))
		}
		sameJSON(t, ev.Data.Object, listed.Data[0])
		sameJSON(t, ev.Data.Object, resp.body)
	})

	refused := []struct {
		name       string
		method     string // of the charge; "" for an unknown charge
		refunded   string // the amount refunded before; "" for none, "all"
		amount     string
		wantStatus int
		wantCode   string
		wantAmount int64
	}{
		{"UnknownCharge", "", "", `,"amount":500`, http.StatusNotFound, "resource_missing", 500},
		{"UnknownChargeNoAmount", "", "", ``, http.StatusNotFound, "resource_missing", 0},
		{"DeclinedCharge", "pm_card_declined", "", ``, http.StatusBadRequest, "charge_not_refundable", 1000},
		{"OverRefund", "pm_card_visa", `400`, `,"amount":601`, http.StatusBadRequest, "amount_too_large", 601},
		{"AlreadyRefunded", "pm_card_visa", `all`, ``, http.StatusBadRequest, "charge_already_refunded", 0},
	}
	for _, tt := range refused {
		t.Run("RefundFailed"+tt.name, func(t *testing.T) {
			t.Parallel()
			key := "wh-refused-" + tt.name
			ch := "ch_unknown" + tt.name
			if tt.method != "" {
				ch = e.charge(key+"-charge", tt.method)
			}
			if tt.refunded != "" {
				body := `{"charge":"` + ch + `"}`
				if tt.refunded != "all" {
					body = `{"charge":"` + ch + `","amount":` + tt.refunded + `}`
				}
				e.postOK(t, "/v1/refunds", key+"-first", body)
			}
			resp := e.post("/v1/refunds", key, `{"charge":"`+ch+`"`+tt.amount+`}`)
			if resp.status != tt.wantStatus || decodeError(t, resp).Code != tt.wantCode {
				t.Fatalf("refund: %d %s", resp.status, resp.body)
			}
			ev := onlyDelivery(t, e, r, key, "refund.failed")
			var object map[string]any
			if err := json.Unmarshal(ev.Data.Object, &object); err != nil {
				t.Fatal(err)
			}
			created, _ := object["created_at"].(string)
			if _, err := time.Parse(time.RFC3339Nano, created); err != nil {
				t.Errorf("created_at %q: %v", created, err)
			}
			delete(object, "created_at")
			want := map[string]any{
				"id": nil, "object": "refund", "status": "failed", "charge": ch, "amount": float64(tt.wantAmount),
				"idempotency_key": key, "failure_code": tt.wantCode,
			}
			if !mapsEqual(object, want) {
				t.Errorf("object = %s", ev.Data.Object)
			}
		})
	}
}

// mapsEqual compares two decoded JSON objects of scalars.
func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v != w {
			return false
		}
	}
	return true
}

// TestWebhookNoEvent checks that only completed operations make events:
// not a 5xx, a refusal before the key is reserved, a closed key or a replay.
func TestWebhookNoEvent(t *testing.T) {
	t.Parallel()
	e, r := newWebhookEnv(t, nil, nil)

	if resp := e.post("/v1/charges", "none-5xx", `{"amount":100,"currency":"USD","payment_method":"pm_card_processing_error"}`); resp.status != http.StatusInternalServerError {
		t.Fatalf("processing error: %d %s", resp.status, resp.body)
	}
	if resp := e.post("/v1/charges", "none-invalid", `{"amount":-1,"currency":"USD","payment_method":"pm_card_visa"}`); resp.status != http.StatusBadRequest {
		t.Fatalf("invalid: %d %s", resp.status, resp.body)
	}
	e.close("/v1/charges/close", "none-closed")
	if resp := e.post("/v1/charges", "none-closed", visaBody); resp.status != http.StatusBadRequest {
		t.Fatalf("charge on a closed key: %d %s", resp.status, resp.body)
	}
	if resp := e.post("/v1/refunds", "none-closed", `{"charge":"ch_x"}`); resp.status != http.StatusBadRequest {
		t.Fatalf("refund on a closed key: %d %s", resp.status, resp.body)
	}
	if n := e.count(`SELECT count(*) FROM processor.webhook_events`); n != 0 {
		t.Fatalf("%d events, want none", n)
	}

	// One charge, then its replay, a reuse of its key and its close: one event.
	e.charge("one", "pm_card_visa")
	if resp := e.post("/v1/charges", "one", `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`); resp.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", resp.status, resp.body)
	}
	if resp := e.post("/v1/charges", "one", visaBody); resp.status != http.StatusBadRequest {
		t.Fatalf("reuse: %d %s", resp.status, resp.body)
	}
	e.close("/v1/charges/close", "one")
	onlyDelivery(t, e, r, "one", "charge.succeeded")
	if n := e.count(`SELECT count(*) FROM processor.webhook_events`); n != 1 {
		t.Errorf("%d events, want 1", n)
	}
}

func TestWebhooksOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	ch := e.charge("off-visa", "pm_card_visa")
	e.charge("off-declined", "pm_card_declined")
	e.postOK(t, "/v1/refunds", "off-refund", `{"charge":"`+ch+`","amount":100}`)
	if resp := e.post("/v1/refunds", "off-refused", `{"charge":"ch_unknown"}`); resp.status != http.StatusNotFound {
		t.Fatalf("refund: %d %s", resp.status, resp.body)
	}
	if n := e.count(`SELECT count(*) FROM processor.webhook_events`); n != 0 {
		t.Errorf("%d events, want none", n)
	}
}

// TestWebhookWhileAnswerWithheld checks that the event of a pm_card_timeout
// charge is sent as soon as the charge commits, by the sender's nudge (it
// never polls here), while the answer is still withheld.
func TestWebhookWhileAnswerWithheld(t *testing.T) {
	t.Parallel()
	e, r := newWebhookEnv(t, nil, func(cfg *fakeprocessor.Config) {
		cfg.TimeoutHang, cfg.Webhooks.PollInterval = time.Hour, time.Hour
	})
	// Should the test fail, the held request is released before the
	// server waits for it to end.
	t.Cleanup(e.proc.Close)

	answered := e.postAsync("/v1/charges", "held", `{"amount":100,"currency":"USD","payment_method":"pm_card_timeout"}`)
	ev := onlyDelivery(t, e, r, "held", "charge.succeeded")
	select {
	case resp := <-answered:
		t.Fatalf("answered before the webhook was delivered: %d %s", resp.status, resp.body)
	default:
	}
	e.proc.Close()
	resp := <-answered
	if resp.status != http.StatusOK {
		t.Fatalf("answer: %d %s", resp.status, resp.body)
	}
	sameJSON(t, ev.Data.Object, resp.body)
}
