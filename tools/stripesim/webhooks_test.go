package stripesim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/tools/stripesim"
)

// secret is the webhook endpoint's signing secret.
const secret = "whsec_stripesim_test"

// delivery is one webhook a receiver got.
type delivery struct {
	body   []byte
	header http.Header
}

// receiver is a webhook endpoint that answers status (a func of the count
// of deliveries so far) and passes each delivery on.
type receiver struct {
	url        string
	deliveries chan delivery
}

// receive serves a receiver until the test ends.
func receive(t *testing.T, status func(n int) int) *receiver {
	t.Helper()
	r := &receiver{deliveries: make(chan delivery, 100)}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.deliveries <- delivery{body: body, header: req.Header.Clone()}
		w.WriteHeader(status(int(n.Add(1))))
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// ok answers every delivery 200.
func ok(int) int { return http.StatusOK }

// next is the next delivery of an event of type typ, the others skipped.
func (r *receiver) next(t *testing.T, typ string) delivery {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case d := <-r.deliveries:
			var ev struct{ Type string }
			if err := json.Unmarshal(d.body, &ev); err != nil {
				t.Fatalf("a delivery is not JSON: %v", err)
			}
			if ev.Type == typ {
				return d
			}
		case <-timeout:
			t.Fatalf("no %s delivered in %s", typ, deadline)
		}
	}
}

func TestWebhooks(t *testing.T) {
	t.Parallel()

	// An event is signed as the adapter verifies it, and parses to the
	// outcome of the charge it is about.
	t.Run("Verified", func(t *testing.T) {
		t.Parallel()
		r := receive(t, ok)
		e := start(t, stripesim.Options{WebhookURL: r.url, WebhookSecret: secret})
		pi := e.mustCreate(t, charge(1000, "pm_card_visa", "key-webhook"))
		d := r.next(t, "payment_intent.succeeded")
		if err := stripe.Verify(d.body, d.header, []string{secret}, e.sim.Now()); err != nil {
			t.Fatalf("verify: %v", err)
		}
		if err := stripe.Verify(d.body, d.header, []string{"whsec_other"}, e.sim.Now()); err == nil {
			t.Error("verified with another secret")
		}
		ev, err := stripe.ParseEvent(d.body)
		if err != nil || ev.Outcome.ID != pi.ID || !ev.Outcome.Succeeded || ev.DownstreamKey != "key-webhook" || ev.Amount != 1000 {
			t.Errorf("parse = %+v, %v; want the success of %s under key-webhook", ev, err, pi.ID)
		}
	})

	// A delivery answered 500 is sent again.
	t.Run("Retried", func(t *testing.T) {
		t.Parallel()
		r := receive(t, func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		e := start(t, stripesim.Options{WebhookURL: r.url, WebhookSecret: secret})
		e.mustCreate(t, fence())
		first, again := r.next(t, "payment_intent.created"), r.next(t, "payment_intent.created")
		if eventID(t, first.body) != eventID(t, again.body) {
			t.Error("the retry is another event")
		}
		waitFor(t, "the retry to be counted", func() bool { return e.sim.Stats().WebhooksSent == 1 })
	})

	// WebhookDuplicate sends an event twice.
	t.Run("Duplicated", func(t *testing.T) {
		t.Parallel()
		r := receive(t, ok)
		e := start(t, stripesim.Options{WebhookURL: r.url, WebhookSecret: secret, WebhookDuplicate: 1})
		e.mustCreate(t, fence())
		first, again := r.next(t, "payment_intent.created"), r.next(t, "payment_intent.created")
		if eventID(t, first.body) != eventID(t, again.body) {
			t.Error("the duplicate is another event")
		}
	})

	// WebhookDrop sends nothing: the drop is decided before any sending.
	t.Run("Dropped", func(t *testing.T) {
		t.Parallel()
		r := receive(t, ok)
		e := start(t, stripesim.Options{WebhookURL: r.url, WebhookSecret: secret, WebhookDrop: 1})
		e.mustCreate(t, charge(1000, "pm_card_visa", "key"))
		if st := e.sim.Stats(); st.WebhooksDropped != len(e.sim.Events()) || st.WebhooksDropped == 0 {
			t.Errorf("%d dropped of %d events; want all", st.WebhooksDropped, len(e.sim.Events()))
		}
		select {
		case d := <-r.deliveries:
			t.Errorf("delivered %s", d.body)
		default:
		}
	})

	// Close stops deliveries still waiting out their delay.
	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		r := receive(t, ok)
		e := start(t, stripesim.Options{WebhookURL: r.url, WebhookSecret: secret, WebhookDelay: time.Hour, Seed: 1})
		e.mustCreate(t, charge(1000, "pm_card_visa", "key"))
		closed := make(chan struct{})
		go func() {
			e.sim.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(deadline):
			t.Fatal("Close waited for delayed deliveries")
		}
		if st := e.sim.Stats(); st.WebhooksSent+st.WebhooksFailed != 0 {
			t.Errorf("stats %+v; want nothing sent", st)
		}
	})
}

// eventID is the id of an event's body.
func eventID(t *testing.T, body []byte) string {
	t.Helper()
	var ev struct{ ID string }
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		t.Fatalf("event %s has no id: %v", body, err)
	}
	return ev.ID
}
