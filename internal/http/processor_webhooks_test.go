package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/stacktest"
)

// signedEvent is a processor event about the charge of paymentID, and the
// Standard Webhooks headers of its delivery signed with secret at at.
func signedEvent(t *testing.T, secret, id, paymentID string, amount int64, at time.Time) (string, []string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":"charge.succeeded","created":%d,"data":{"object":{"id":"ch_%s","object":"charge",`+
		`"amount":%d,"currency":"USD","payment_method":"pm_card_visa","payment_id":%q,"description":null,"status":"succeeded",`+
		`"failure_code":null,"failure_message":null,"amount_refunded":0,"idempotency_key":"charge_%s","created_at":"2026-11-23T00:00:00Z"}}}`,
		id, at.Unix(), id, amount, paymentID, paymentID)
	return body, sign(t, secret, id, at, body)
}

func sign(t *testing.T, secret, id string, at time.Time, body string) []string {
	t.Helper()
	secrets, err := signing.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := secrets.Sign(h, id, at, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return []string{"webhook-id", h.Get("webhook-id"), "webhook-timestamp", h.Get("webhook-timestamp"),
		"webhook-signature", h.Get("webhook-signature")}
}

func deliver(s *stacktest.Stack, body string, headers []string) stacktest.Response {
	s.T.Helper()
	return s.Request(http.MethodPost, "/v1/processor/webhooks", "", body, headers...)
}

// TestProcessorWebhookReceipt covers what the API answers a delivery, and
// that every refusal changes nothing.
func TestProcessorWebhookReceipt(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	pay := s.Pay(acme, "webhook-receipt", `{"amount":1500,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "respond-async")
	if pay.Status != http.StatusAccepted {
		t.Fatalf("payment: %d %s", pay.Status, pay.Body)
	}
	p := decodePayment(t, pay.Body)
	now := time.Now()
	other := signing.NewSecret()
	recorded := func() int { return s.Count(`SELECT count(*) FROM processor_events`) }
	jobs := func() int { return s.Count(`SELECT count(*) FROM river_job WHERE kind = 'settle_processor_event'`) }

	body, headers := signedEvent(t, s.WebhookSecret, "evt_forged", p.ID, 1500, now)
	_, forged := signedEvent(t, other, "evt_forged", p.ID, 1500, now)
	staleBody, stale := signedEvent(t, s.WebhookSecret, "evt_forged", p.ID, 1500, now.Add(-signing.Tolerance-time.Minute))
	futureBody, future := signedEvent(t, s.WebhookSecret, "evt_forged", p.ID, 1500, now.Add(signing.Tolerance+time.Minute))
	rotated := sign(t, other+","+s.WebhookSecret, "evt_forged", now, body)
	malformed := `{"id":"evt_forged","type":"charge.succeeded","data":{"object":{"object":"refund"}}}`
	otherID := sign(t, s.WebhookSecret, "evt_other", now, body)
	huge := strings.Repeat(" ", 64<<10) + body
	for _, c := range []struct {
		name    string
		body    string
		headers []string
		status  int
		code    string
	}{
		{"forged", body, forged, http.StatusBadRequest, "webhook_signature_invalid"},
		{"unsigned", body, nil, http.StatusBadRequest, "webhook_signature_invalid"},
		{"replayed after the tolerance", staleBody, stale, http.StatusBadRequest, "webhook_signature_invalid"},
		{"from the future", futureBody, future, http.StatusBadRequest, "webhook_signature_invalid"},
		{"truncated", body[:len(body)-2], headers, http.StatusBadRequest, "webhook_signature_invalid"},
		{"over 64 KiB", huge, sign(t, s.WebhookSecret, "evt_forged", now, huge), http.StatusRequestEntityTooLarge, "payload_too_large"},
		{"signed, not an event", malformed, sign(t, s.WebhookSecret, "evt_forged", now, malformed), http.StatusBadRequest, "webhook_payload_invalid"},
		{"signed, another id", body, otherID, http.StatusBadRequest, "webhook_payload_invalid"},
	} {
		res := deliver(s, c.body, c.headers)
		var problem struct{ Code string }
		_ = json.Unmarshal(res.Body, &problem)
		if res.Status != c.status || problem.Code != c.code || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
		}
		if recorded() != 0 || jobs() != 0 {
			t.Fatalf("%s: a refused delivery recorded something", c.name)
		}
	}

	ignored := `{"id":"evt_ignored","type":"charge.dispute.created","created":1,"data":{"object":{}}}`
	if res := deliver(s, ignored, sign(t, s.WebhookSecret, "evt_ignored", now, ignored)); res.Status != http.StatusOK ||
		!strings.Contains(string(res.Body), `"result":"ignored"`) || recorded() != 0 {
		t.Fatalf("ignored type: %d %s", res.Status, res.Body)
	}

	// Signed with the old and the new secret during a rotation: accepted.
	res := deliver(s, body, rotated)
	if res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"result":"accepted"`) {
		t.Fatalf("accepted: %d %s", res.Status, res.Body)
	}
	if recorded() != 1 || jobs() != 1 {
		t.Fatalf("recorded %d events, %d jobs", recorded(), jobs())
	}
	if res := deliver(s, body, headers); res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"result":"duplicate"`) ||
		recorded() != 1 || jobs() != 1 {
		t.Fatalf("duplicate: %d %s", res.Status, res.Body)
	}

	unknown, h := signedEvent(t, s.WebhookSecret, "evt_unknown", "pay_000000000000000000000000", 100, now)
	if res := deliver(s, unknown, h); res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"result":"unknown_operation"`) ||
		s.Count(`SELECT count(*) FROM needs_review WHERE kind = 'processor_event_unknown_operation' AND reference = 'evt_unknown'`) != 1 {
		t.Fatalf("unknown operation: %d %s", res.Status, res.Body)
	}

	wantMetrics(t, s.APIMetrics(),
		`payments_processor_webhooks_received_total{result="accepted"} 1`,
		`payments_processor_webhooks_received_total{result="duplicate"} 1`,
		`payments_processor_webhooks_received_total{result="invalid_signature"} 3`,
		`payments_processor_webhooks_received_total{result="stale"} 2`,
		`payments_processor_webhooks_received_total{result="malformed"} 2`,
		`payments_processor_webhooks_received_total{result="too_large"} 1`,
		`payments_processor_webhooks_received_total{result="ignored"} 1`,
		`payments_processor_webhooks_received_total{result="unknown_operation"} 1`,
	)

	// The worker settles the payment once, by whichever path commits first.
	s.StartWorker()
	stacktest.WaitFor(t, "the payment settled", func() bool {
		return s.Count(`SELECT count(*) FROM payments WHERE id = $1 AND status = 'succeeded' AND settled_by IS NOT NULL`, p.ID) == 1
	})
}

// TestProcessorWebhooksSettle runs the processor's webhooks for real, each
// delivered twice at once: pm_card_timeout payments, whose worker calls hang,
// answer 201 within their wait, settled by the webhook; each event is
// recorded once, the racing copy answered duplicate.
func TestProcessorWebhooksSettle(t *testing.T) {
	t.Parallel()
	s := startStack(t, stacktest.Options{ProcessorWebhooks: true, Chaos: fakeprocessor.Chaos{WebhookDuplicateRate: 1}})
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res := s.Pay(acme, fmt.Sprintf("timeout-%d", i), `{"amount":1000,"currency":"USD","payment_method":"pm_card_timeout"}`,
				"Prefer", "wait=8")
			var p struct{ ID, Status string }
			if err := json.Unmarshal(res.Body, &p); err != nil || res.Status != http.StatusCreated || p.Status != "succeeded" {
				t.Errorf("payment %d: %d %s", i, res.Status, res.Body)
			}
			ids[i] = p.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := s.Count(`SELECT count(*) FROM payments WHERE settled_by = 'webhook'`); got != n {
		t.Fatalf("%d of %d payments settled by webhook", got, n)
	}
	for _, id := range ids {
		wantCharges(t, s, id, 1)
	}
	stacktest.WaitFor(t, "every duplicate delivery answered", func() bool {
		m := s.APIMetrics()
		return strings.Contains(m, fmt.Sprintf(`payments_processor_webhooks_received_total{result="duplicate"} %d`, n)) &&
			strings.Contains(m, fmt.Sprintf(`payments_processor_webhooks_received_total{result="accepted"} %d`, n))
	})
	if got := s.Count(`SELECT count(*) FROM processor_events WHERE result = 'settled'`); got != n {
		t.Fatalf("%d events settled their payment, want %d", got, n)
	}
	wantMetrics(t, s.WorkerMetrics(),
		fmt.Sprintf(`payments_operations_settled_total{path="webhook",resource_type="payment"} %d`, n),
		`payments_operations_settled_total{path="worker",resource_type="payment"} 0`,
		fmt.Sprintf(`payments_processor_events_processed_total{result="settled"} %d`, n),
	)
}
