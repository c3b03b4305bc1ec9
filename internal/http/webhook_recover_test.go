package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/tools/freeport"
	"github.com/example/payments/tools/stacktest"
)

// deliveryJSON is a delivery as the API answers it.
type deliveryJSON struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	Event    string `json:"event"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
}

// randomID is the shape of every id the API shows: a prefix and 24 base62
// characters, never a sequence.
var randomID = regexp.MustCompile(`^(whd|wha)_[0-9A-Za-z]{24}$`)

// TestWebhookEventsAndRecovery: an event names the request that caused it;
// an event's deliveries and an endpoint's log (filtered) show random ids; a
// recovery resends every failed delivery since a time, and only those; the
// log never shows a network error's own text.
func TestWebhookEventsAndRecovery(t *testing.T) {
	t.Parallel()

	t.Run("EventNamesItsRequest", func(t *testing.T) {
		t.Parallel()
		var body atomic.Value
		s, _, _ := startDelivering(t, stacktest.Options{}, func(w http.ResponseWriter, r *http.Request, _ int64) bool {
			var ev map[string]json.RawMessage
			_ = json.NewDecoder(r.Body).Decode(&ev)
			body.Store(string(ev["request"]))
			w.WriteHeader(http.StatusOK)
			return true
		})
		res := created(t, s, acme, "pay-req-1", `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "wait=10")
		reqID := res.Header.Get("X-Request-Id")
		// A replay has a request id of its own; the event names the first.
		if again := s.Pay(acme, "pay-req-1", `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`); again.Header.Get("X-Request-Id") == reqID {
			t.Fatal("a replay has the first request's id")
		}
		events := decode[struct {
			Data []struct {
				ID      string
				Request struct {
					ID             *string `json:"id"`
					IdempotencyKey *string `json:"idempotency_key"`
				}
			}
		}](t, s.Request(http.MethodGet, "/v1/events", acme, "")).Data
		if len(events) != 1 || events[0].Request.ID == nil || *events[0].Request.ID != reqID ||
			events[0].Request.IdempotencyKey == nil || *events[0].Request.IdempotencyKey != "pay-req-1" {
			t.Fatalf("events %+v, want request {%s, pay-req-1}", events, reqID)
		}
		want := fmt.Sprintf(`{"id":%q,"idempotency_key":"pay-req-1"}`, reqID)
		stacktest.WaitFor(t, "the delivery with the request", func() bool { v, _ := body.Load().(string); return v == want })
	})

	t.Run("DeliveriesLogAndFilters", func(t *testing.T) {
		t.Parallel()
		// Succeeded payments are delivered; declined ones fail every attempt.
		s, _, e := startDelivering(t, stacktest.Options{}, func(w http.ResponseWriter, r *http.Request, _ int64) bool {
			var ev struct{ Type string }
			_ = json.NewDecoder(r.Body).Decode(&ev)
			if ev.Type == "payment.failed" {
				w.WriteHeader(http.StatusBadGateway)
			} else {
				w.WriteHeader(http.StatusOK)
			}
			return true
		})
		paidPayment(t, s, "pay-ok")
		s.Pay(acme, "pay-declined", `{"amount":1000,"currency":"USD","payment_method":"pm_card_declined"}`, "Prefer", "wait=10")
		stacktest.WaitFor(t, "one delivered, one failed", func() bool {
			return deliveries(s, "delivered") == 1 && deliveries(s, "failed") == 1
		})
		type line struct{ ID, Delivery, Event string }
		logOf := func(query string) []line {
			res := s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e+"/deliveries?limit=100"+query, acme, "")
			if res.Status != http.StatusOK {
				t.Fatalf("log%s: %d %s", query, res.Status, res.Body)
			}
			return decode[struct{ Data []line }](t, res).Data
		}
		all := logOf("")
		if len(all) != 5 {
			t.Fatalf("%d lines, want 1 delivered and 4 failed attempts", len(all))
		}
		for _, l := range all {
			if !randomID.MatchString(l.ID) || !randomID.MatchString(l.Delivery) {
				t.Fatalf("ids %s, %s are not random ids", l.ID, l.Delivery)
			}
		}
		if n := len(logOf("&status=succeeded")); n != 1 {
			t.Errorf("%d succeeded lines, want 1", n)
		}
		if n := len(logOf("&status=failed")); n != 4 {
			t.Errorf("%d failed lines, want 4", n)
		}
		if n := len(logOf("&type=payment.failed")); n != 4 {
			t.Errorf("%d payment.failed lines, want 4", n)
		}
		if n := len(logOf("&status=succeeded&type=payment.failed")); n != 0 {
			t.Errorf("%d succeeded payment.failed lines, want none", n)
		}
		// Pages follow the random ids.
		first := decode[struct {
			Data    []line
			HasMore bool `json:"has_more"`
		}](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e+"/deliveries?limit=2", acme, ""))
		rest := logOf("&starting_after=" + first.Data[1].ID)
		if !first.HasMore || len(rest) != 3 || rest[0].ID != all[2].ID {
			t.Fatalf("pages %+v then %+v, want all of %+v", first, rest, all)
		}
		for _, bad := range []string{"status=delivered", "type=payment.lost", "starting_after=wha_1", "starting_after=" + all[0].Delivery} {
			res := s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e+"/deliveries?"+bad, acme, "")
			if res.Status != http.StatusBadRequest && res.Status != http.StatusNotFound {
				t.Errorf("%s: %d %s, want 400 or 404", bad, res.Status, res.Body)
			}
		}

		// One event's deliveries.
		evID := all[0].Event
		list := decode[struct{ Data []deliveryJSON }](t, s.Request(http.MethodGet, "/v1/events/"+evID+"/deliveries", acme, "")).Data
		if len(list) != 1 || list[0].Endpoint != e || list[0].Event != evID || !randomID.MatchString(list[0].ID) {
			t.Fatalf("event's deliveries %+v", list)
		}
		if res := s.Request(http.MethodGet, "/v1/events/"+evID+"/deliveries", globex, ""); res.Status != http.StatusNotFound {
			t.Fatalf("another tenant's event: %d %s", res.Status, res.Body)
		}
	})

	t.Run("Recover", func(t *testing.T) {
		t.Parallel()
		var down atomic.Bool
		down.Store(true)
		s, _, e := startDelivering(t, stacktest.Options{}, func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
			if down.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			} else {
				w.WriteHeader(http.StatusOK)
			}
			return true
		})
		paidPayment(t, s, "pay-old")
		waitDeliveries(t, s, "failed", 1)
		// The failure before since stays failed; those after are resent.
		s.Exec(`UPDATE webhook_deliveries SET created_at = now() - interval '1 hour'`)
		since := time.Now().UTC().Add(-time.Minute)
		paidPayment(t, s, "pay-1")
		paidPayment(t, s, "pay-2")
		waitDeliveries(t, s, "failed", 3)
		recover := func(key, body string) stacktest.Response {
			return s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e+"/recover", acme, body, "Idempotency-Key", key)
		}
		for _, bad := range []string{`{}`, `{"since":"yesterday"}`, fmt.Sprintf(`{"since":%q}`, time.Now().Add(time.Hour).Format(time.RFC3339))} {
			if res := recover("bad", bad); res.Status != http.StatusBadRequest && res.Status != http.StatusUnprocessableEntity {
				t.Fatalf("recover %s: %d %s", bad, res.Status, res.Body)
			}
		}
		down.Store(false)
		body := fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339))
		res := recover("rec-1", body)
		if res.Status != http.StatusAccepted || !strings.Contains(string(res.Body), `"resent":2`) || !strings.Contains(string(res.Body), `"has_more":false`) {
			t.Fatalf("recover: %d %s", res.Status, res.Body)
		}
		waitDeliveries(t, s, "delivered", 2) // the two resent
		if n := deliveries(s, "failed"); n != 1 {
			t.Fatalf("%d failed, want the one before since", n)
		}
		// A replay answers the same and resends nothing.
		if again := recover("rec-1", body); again.Status != http.StatusAccepted || string(again.Body) != string(res.Body) {
			t.Fatalf("replay: %d %s", again.Status, again.Body)
		}
		// Nothing failed since: nothing to resend.
		if res := recover("rec-2", body); !strings.Contains(string(res.Body), `"resent":0`) {
			t.Fatalf("second recovery: %d %s", res.Status, res.Body)
		}
		// A disabled endpoint is refused, and nothing changes.
		updateEndpoint(s, e, "off", `{"status":"disabled"}`)
		if res := recover("rec-3", fmt.Sprintf(`{"since":%q}`, time.Now().Add(-2*time.Hour).Format(time.RFC3339))); res.Status != http.StatusConflict ||
			!strings.Contains(string(res.Body), "endpoint_disabled") {
			t.Fatalf("recover a disabled endpoint: %d %s", res.Status, res.Body)
		}
		if n := deliveries(s, "failed"); n != 1 {
			t.Fatalf("%d failed after a refused recovery, want 1", n)
		}
		// The refusal leaves the key free: once the endpoint is enabled,
		// the same request under the same key recovers.
		updateEndpoint(s, e, "on", `{"status":"enabled"}`)
		if res := recover("rec-3", fmt.Sprintf(`{"since":%q}`, time.Now().Add(-2*time.Hour).Format(time.RFC3339))); res.Status != http.StatusAccepted {
			t.Fatalf("the same key once enabled: %d %s, want the recovery", res.Status, res.Body)
		}
	})

	t.Run("AttemptOutlivesTheJobTimeout", func(t *testing.T) {
		t.Parallel()
		// JOB_TIMEOUT (2 s) is shorter than the receiver takes (3 s): a
		// delivery's job has a timeout of its own, above its attempt's 15 s,
		// so that no attempt is cut by it and none outlives its place.
		s, _, e := startDelivering(t, stacktest.Options{JobTimeout: 2 * time.Second, ProcessorTimeout: time.Second},
			func(_ http.ResponseWriter, r *http.Request, _ int64) bool {
				select {
				case <-r.Context().Done():
				case <-time.After(3 * time.Second):
				}
				return false
			})
		paidPayment(t, s, "pay-1")
		delivered(t, s)
		if l := deliveryLog(t, s, e); len(l) != 1 || l[0].Error != nil {
			t.Fatalf("logged %+v, want one attempt that delivered", l)
		}
	})

	t.Run("LogHidesNetworkErrors", func(t *testing.T) {
		t.Parallel()
		s, _, e := startDelivering(t, stacktest.Options{}, nil)
		// The receiver goes away: the connection is refused, on loopback.
		// A closed server's port could be taken again by then.
		addr, free, err := freeport.Refusing()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { free() })
		s.Exec(`UPDATE webhook_endpoints SET url = $1`, "http://"+addr+"/hooks")
		paidPayment(t, s, "pay-1")
		waitDeliveries(t, s, "failed", 1)
		for _, l := range deliveryLog(t, s, e) {
			if l.Error == nil || *l.Error != "the receiver refused the connection" {
				got, _ := json.Marshal(l.Error)
				t.Fatalf("logged error %s", got)
			}
		}
		// A host that no longer resolves names no resolver.
		s.Exec(`UPDATE webhook_endpoints SET url = 'http://no-such-host.invalid/hooks'`)
		if res := resend(s, e, deliveryLog(t, s, e)[0].Event, "rs"); res.Status != http.StatusAccepted {
			t.Fatalf("resend: %d %s", res.Status, res.Body)
		}
		stacktest.WaitFor(t, "the resend failed", func() bool {
			return s.Count(`SELECT count(*) FROM webhook_delivery_attempts WHERE error = 'the URL''s host did not resolve'`) == 4
		})
	})
}
