package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/stacktest"
)

// TestWebhookEndpoints covers registering, reading, changing, rotating and
// removing endpoints, tenant isolation, and that a secret is shown once.
func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res, e := register(t, s, acme, "we-1", "https://127.0.0.1:8443/hooks", "payment.succeeded")
	if res.Status != http.StatusCreated || e.Secret == "" || !strings.HasPrefix(e.Secret, "whsec_") ||
		e.Status != "enabled" || !strings.HasPrefix(e.ID, "we_") || res.Header.Get("Location") != "/v1/webhook_endpoints/"+e.ID {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if _, err := signing.ParseSecrets(e.Secret); err != nil {
		t.Fatalf("secret %v", err)
	}
	// The secret is stored encrypted, and nowhere in the clear.
	secret := strings.TrimPrefix(e.Secret, "whsec_")
	if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE position($1 in convert_from(response_body, 'UTF8')) > 0`, secret); n != 0 {
		t.Fatal("the secret is stored in a key's response")
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE position(convert_to($1, 'UTF8') in ciphertext) > 0`, e.Secret); n != 0 {
		t.Fatal("the secret is stored in the clear")
	}

	b, _ := json.Marshal(map[string]any{"url": "https://127.0.0.1:8443/hooks", "enabled_events": []string{"payment.succeeded"}})
	replay := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, string(b), "Idempotency-Key", "we-1")
	if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || decode[webhooks.Endpoint](t, replay).Secret != "" ||
		decode[webhooks.Endpoint](t, replay).ID != e.ID {
		t.Fatalf("replay: %d %s", replay.Status, replay.Body)
	}
	if got := getEndpoint(t, s, e.ID); got.ID != e.ID || got.Secret != "" {
		t.Fatalf("get: %+v", got)
	}
	if res := s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e.ID, globex, ""); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's endpoint: %d", res.Status)
	}
	if res := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID, globex, `{"status":"disabled"}`, "Idempotency-Key", "g-1"); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's update: %d", res.Status)
	}
	list := decode[struct{ Data []webhooks.Endpoint }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints", acme, ""))
	if len(list.Data) != 1 || list.Data[0].ID != e.ID {
		t.Fatalf("list: %+v", list)
	}
	if got := decode[struct{ Data []webhooks.Endpoint }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints", globex, "")); len(got.Data) != 0 {
		t.Fatalf("globex sees %+v", got)
	}

	upd := updateEndpoint(s, e.ID, "we-2", `{"status":"disabled","enabled_events":["*"]}`)
	if got := decode[webhooks.Endpoint](t, upd); upd.Status != http.StatusOK || got.Status != "disabled" || *got.DisabledReason != "by_tenant" ||
		got.EnabledEvents[0] != "*" {
		t.Fatalf("update: %d %s", upd.Status, upd.Body)
	}

	rot := rotate(s, e.ID, "we-3", "")
	rotated := decode[webhooks.Endpoint](t, rot)
	if rot.Status != http.StatusOK || rotated.Secret == "" || rotated.Secret == e.Secret {
		t.Fatalf("rotate: %d %s", rot.Status, rot.Body)
	}
	if again := rotate(s, e.ID, "we-3", ""); decode[webhooks.Endpoint](t, again).Secret != "" {
		t.Fatalf("a rotation's replay shows the secret: %s", again.Body)
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE endpoint_id = $1 AND expires_at > now() + interval '23 hours'`, e.ID); n != 1 {
		t.Fatalf("%d old secrets still signing for the grace period", n)
	}

	for _, c := range []struct{ name, body string }{
		{"no events", `{"url":"https://127.0.0.1/x"}`},
		{"unknown event", `{"url":"https://127.0.0.1/x","enabled_events":["payment.refunded"]}`},
		{"no url", `{"enabled_events":["*"]}`},
		{"unknown field", `{"url":"https://127.0.0.1/x","enabled_events":["*"],"secret":"whsec_x"}`},
	} {
		if res := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, c.body, "Idempotency-Key", "bad-"+c.name); res.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
		}
	}

	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, globex, ""); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's delete: %d", res.Status)
	}
	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, acme, ""); res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"deleted":true`) {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, acme, ""); res.Status != http.StatusNotFound {
		t.Fatalf("second delete: %d", res.Status)
	}
}

// TestWebhookEndpointsRefuseTheInside: without private networks allowed,
// registration refuses every URL that reaches the inside, and other schemes.
func TestWebhookEndpointsRefuseTheInside(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{PublicEndpointsOnly: true})
	for i, url := range []string{
		"http://169.254.169.254/latest/meta-data/", "https://169.254.169.254/", "http://127.0.0.1/", "https://127.0.0.1:8443/",
		"http://10.0.0.1/", "https://10.0.0.1/", "https://192.168.1.10/", "https://[::1]/", "https://localhost/hooks",
		"ftp://example.com/", "file:///etc/passwd", "http://example.com/hooks", "https://user:pass@127.0.0.1/",
	} {
		res, _ := register(t, s, acme, fmt.Sprintf("inside-%d", i), url)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"url"`) {
			t.Errorf("%s: %d %s", url, res.Status, res.Body)
		}
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoints`) + s.Count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("a refused registration left %d rows", n)
	}
}

// TestWebhookDelivery delivers events to real receivers: signed and
// verified, the body the event as GET /v1/events/{id} answers it; retried
// with the same webhook-id; 410 disables; 429's Retry-After is waited; a
// spent schedule fails the delivery, in the log and the metrics; a resend
// arrives again and the receiver's dedupe makes it once.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()

	t.Run("SignedVerifiedOnce", func(t *testing.T) {
		t.Parallel()
		s, h2, e := startDelivering(t, stacktest.Options{}, nil, "payment.succeeded")
		id := paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the event at the receiver", func() bool { return len(h2.events()) == 1 })
		if got := h2.events()[0]; !strings.Contains(got, "payment.succeeded "+id+" succeeded") {
			t.Fatalf("receiver printed %q", got)
		}
		evID := strings.Fields(h2.events()[0])[1]
		var body []byte
		h2.front = func(w http.ResponseWriter, r *http.Request, _ int64) bool {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false
		}
		// A declined payment is not wanted by this endpoint.
		s.Pay(acme, "pay-2", `{"amount":1000,"currency":"USD","payment_method":"pm_card_declined"}`, "Prefer", "wait=10")
		// A resend arrives again; the receiver's dedupe makes it once. It is
		// refused while the first delivery is in flight, which it is until
		// the worker records the receiver's answer.
		delivered(t, s)
		if res := resend(s, e, evID, "rs"); res.Status != http.StatusAccepted {
			t.Fatalf("resend: %d %s", res.Status, res.Body)
		}
		stacktest.WaitFor(t, "the resend", func() bool { return len(deliveryLog(t, s, e)) == 2 })
		if got := s.Request(http.MethodGet, "/v1/events/"+evID, acme, "").Body; !bytes.Equal(body, got) {
			t.Fatalf("delivered body\n%s\nis not GET /v1/events/{id}\n%s", body, got)
		}
		if len(h2.events()) != 1 {
			t.Fatalf("receiver printed %v", h2.events())
		}
		for _, a := range deliveryLog(t, s, e) {
			if a.Event != evID || a.StatusCode == nil || *a.StatusCode != 200 {
				t.Fatalf("log %+v", a)
			}
		}
		if s.Count(`SELECT count(*) FROM webhook_deliveries`) != 1 {
			t.Fatal("a delivery for an event the endpoint does not want")
		}
	})

	t.Run("RetriedWithTheSameID", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		h := newReceiver(t, 2)
		e := registerWith(t, s, h).ID
		paidPayment(t, s, "pay-1")
		delivered(t, s)
		if len(h.events()) != 1 {
			t.Fatalf("the receiver printed %v", h.events())
		}
		log := deliveryLog(t, s, e)
		if len(log) != 3 || *log[2].StatusCode != 500 || *log[1].StatusCode != 500 || *log[0].StatusCode != 200 ||
			log[2].NextRetryAt == nil || log[0].NextRetryAt != nil {
			t.Fatalf("log %+v", log)
		}
		n := 0
		h.ids.Range(func(_, v any) bool { n++; return v.(*atomic.Int64).Load() == 3 })
		if n != 1 {
			t.Fatalf("deliveries under %d webhook-ids", n)
		}
	})

	t.Run("GoneDisables", func(t *testing.T) {
		t.Parallel()
		s, h, e := startDelivering(t, stacktest.Options{}, answer(http.StatusGone))
		paidPayment(t, s, "pay-1")
		waitDisabled(t, s, e, "gone")
		paidPayment(t, s, "pay-2")
		if h.hits.Load() != 1 || deliveries(s, "failed") != 1 {
			t.Fatalf("%d hits after 410", h.hits.Load())
		}
	})

	t.Run("RetryAfterWaited", func(t *testing.T) {
		t.Parallel()
		s, _, e := startDelivering(t, stacktest.Options{}, func(w http.ResponseWriter, _ *http.Request, n int64) bool {
			if n == 1 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		})
		paidPayment(t, s, "pay-1")
		// While it waits out Retry-After, the delivery is the oldest undelivered.
		stacktest.WaitFor(t, "the delivery waiting", func() bool {
			return value(t, s.WorkerMetrics(), "payments_webhook_oldest_undelivered_seconds") > 0
		})
		delivered(t, s)
		log := deliveryLog(t, s, e)
		if len(log) != 2 || *log[1].StatusCode != 429 || log[0].CreatedAt.Sub(log[1].CreatedAt) < 2*time.Second ||
			log[1].NextRetryAt.Sub(log[1].CreatedAt) < 2*time.Second {
			t.Fatalf("the schedule's 100 ms was used, not Retry-After: %+v", log)
		}
	})

	t.Run("ScheduleSpentFails", func(t *testing.T) {
		t.Parallel()
		s, h, e := startDelivering(t, stacktest.Options{}, answer(http.StatusBadGateway))
		paidPayment(t, s, "pay-1")
		waitDeliveries(t, s, "failed", 1)
		if log := deliveryLog(t, s, e); len(log) != 4 || h.hits.Load() != 4 {
			t.Fatalf("%d attempts logged, %d made, want the first and 3 retries", len(log), h.hits.Load())
		}
		wantMetrics(t, s.WorkerMetrics(), `payments_webhook_deliveries_total{result="failed"} 1`, `payments_webhook_deliveries_total{result="retrying"} 3`,
			`payments_webhook_delivery_attempts_total 4`, `payments_webhook_oldest_undelivered_seconds 0`,
			`payments_webhook_attempt_duration_seconds_count{result="failed"} 1`,
			`payments_webhook_attempt_duration_seconds_count{result="retrying"} 3`,
			`payments_webhook_attempt_duration_seconds_count{result="delivered"} 0`)
	})

	t.Run("RotationSignsWithBoth", func(t *testing.T) {
		t.Parallel()
		s, holdsOld, e := startDelivering(t, stacktest.Options{}, nil)
		rot := decode[webhooks.Endpoint](t, rotate(s, e, "rot", ""))
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the event verified with the old secret", func() bool { return len(holdsOld.events()) == 1 })
		holdsNew := newReceiver(t, 0)
		holdsNew.start(rot.Secret)
		updateEndpoint(s, e, "to-new", fmt.Sprintf(`{"url":%q}`, holdsNew.srv.URL+"/hooks"))
		paidPayment(t, s, "pay-2")
		stacktest.WaitFor(t, "the event verified with the new secret", func() bool { return len(holdsNew.events()) == 1 })
	})
}

// TestWebhookEndpointURLTooLongOnceEncoded: a URL short enough in its own
// bytes but past the bound once percent-encoded, as it is stored, is a 400
// naming the url, at registration and in an update, and changes nothing.
func TestWebhookEndpointURLTooLongOnceEncoded(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	long := "https://127.0.0.1:8443/" + strings.Repeat("é", 1000) // 2,023 bytes
	res, _ := register(t, s, acme, "we-long", long)
	if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"url"`) {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	res, e := register(t, s, acme, "we-short", "https://127.0.0.1:8443/hooks")
	if res.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	b, _ := json.Marshal(map[string]string{"url": long})
	if res := updateEndpoint(s, e.ID, "we-update", string(b)); res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"url"`) {
		t.Fatalf("update: %d %s", res.Status, res.Body)
	}
	if got := getEndpoint(t, s, e.ID); got.URL != "https://127.0.0.1:8443/hooks" {
		t.Fatalf("after the refused update: %+v", got)
	}
}

// TestWebhookEndpointUpdateNulls: null is no value for a field that cannot
// be null: a 400 naming it, and nothing changes; a description of null
// removes the description.
func TestWebhookEndpointUpdateNulls(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	b, _ := json.Marshal(map[string]any{"url": "https://127.0.0.1:8443/hooks", "enabled_events": []string{"*"}, "description": "Orders"})
	res := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, string(b), "Idempotency-Key", "we-nulls")
	if res.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	e := decode[webhooks.Endpoint](t, res)
	for _, field := range []string{"url", "enabled_events", "status"} {
		res := updateEndpoint(s, e.ID, "null-"+field, `{"`+field+`": null, "description": "changed"}`)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"`+field+`"`) {
			t.Fatalf("%s: null: %d %s", field, res.Status, res.Body)
		}
	}
	if got := getEndpoint(t, s, e.ID); got.Description == nil || *got.Description != "Orders" || got.Status != "enabled" {
		t.Fatalf("after the refused updates: %+v", got)
	}
	if res := updateEndpoint(s, e.ID, "null-description", `{"description": null}`); res.Status != http.StatusOK {
		t.Fatalf("description: null: %d %s", res.Status, res.Body)
	}
	if got := getEndpoint(t, s, e.ID); got.Description != nil || got.URL != "https://127.0.0.1:8443/hooks" {
		t.Fatalf("after description: null: %+v", got)
	}
}
