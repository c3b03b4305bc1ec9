package client

import (
	"encoding/json"
	"testing"
	"time"
)

// eventJSON is an event as the server encodes it, about a payment and
// caused by a request with a key.
var eventJSON = `{"id":"evt_123","object":"event","type":"payment.succeeded","data":{"object":` + paymentJSON(StatusSucceeded) + `},` +
	`"request":{"id":"req_abc","idempotency_key":"order-1842"},"created_at":"2026-01-02T03:04:06Z"}`

func TestEventWireFormat(t *testing.T) {
	t.Parallel()

	var e Event
	if err := json.Unmarshal([]byte(eventJSON), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != "evt_123" || e.Type != EventPaymentSucceeded || !e.CreatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)) {
		t.Errorf("event = %+v", e)
	}
	if e.Request == nil || e.Request.ID == nil || *e.Request.ID != "req_abc" ||
		e.Request.IdempotencyKey == nil || *e.Request.IdempotencyKey != "order-1842" {
		t.Errorf("request = %+v, want req_abc and order-1842", e.Request)
	}
	p, err := e.Payment()
	if err != nil || p.ID != "pay_123" || p.Status != StatusSucceeded {
		t.Errorf("Payment() = %+v, %v", p, err)
	}
	if r, err := e.Refund(); err == nil {
		t.Errorf("Refund() of a payment's event = %+v, want an error", r)
	}

	t.Run("Refund", func(t *testing.T) {
		t.Parallel()
		var e Event
		body := `{"id":"evt_9","object":"event","type":"refund.succeeded","data":{"object":` + refundJSON(StatusSucceeded) + `},` +
			`"request":{"id":null,"idempotency_key":null},"created_at":"2026-01-02T03:04:06Z"}`
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatal(err)
		}
		if e.Request == nil || e.Request.ID != nil || e.Request.IdempotencyKey != nil {
			t.Errorf("request = %+v, want both nil", e.Request)
		}
		if r, err := e.Refund(); err != nil || r.ID != "re_123" || r.PaymentID != "pay_123" {
			t.Errorf("Refund() = %+v, %v", r, err)
		}
		if _, err := e.Payment(); err == nil {
			t.Error("Payment() of a refund's event: nil error")
		}
	})

	t.Run("NoRequest", func(t *testing.T) {
		t.Parallel()
		var e Event
		if err := json.Unmarshal([]byte(`{"id":"evt_1","object":"event","type":"payment.failed","data":{"object":{}}}`), &e); err != nil {
			t.Fatal(err)
		}
		if e.Request != nil {
			t.Errorf("request = %+v, want nil from a server that does not send it", e.Request)
		}
		if _, err := e.Payment(); err == nil {
			t.Error("Payment() of an object without a kind: nil error")
		}
	})
}

func TestWebhookDeliveryWireFormat(t *testing.T) {
	t.Parallel()
	var a WebhookDeliveryAttemptList
	body := `{"object":"list","has_more":true,"data":[` +
		`{"id":"wha_2","object":"webhook_delivery_attempt","delivery":"whd_7","event":"evt_123","attempt":2,"status_code":200,"duration_ms":12,"error":null,"next_retry_at":null,"created_at":"2026-01-02T03:04:10Z"},` +
		`{"id":"wha_1","object":"webhook_delivery_attempt","delivery":"whd_7","event":"evt_123","attempt":1,"status_code":null,"duration_ms":15000,"error":"timeout","next_retry_at":"2026-01-02T03:04:10Z","created_at":"2026-01-02T03:04:05Z"}]}`
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatal(err)
	}
	ok, failed := a.Data[0], a.Data[1]
	if !a.HasMore || ok.StatusCode == nil || *ok.StatusCode != 200 || ok.Error != nil || ok.NextRetryAt != nil || ok.DurationMS != 12 {
		t.Errorf("delivered attempt = %+v", ok)
	}
	if failed.StatusCode != nil || failed.Error == nil || *failed.Error != "timeout" || failed.NextRetryAt == nil || failed.Delivery != "whd_7" {
		t.Errorf("failed attempt = %+v", failed)
	}

	var d WebhookDelivery
	if err := json.Unmarshal([]byte(deliveryJSON), &d); err != nil {
		t.Fatal(err)
	}
	if d.ID != "whd_7" || d.Object != "webhook_delivery" || d.Status != DeliveryPending || d.DeliveredAt != nil {
		t.Errorf("delivery = %+v", d)
	}
}
