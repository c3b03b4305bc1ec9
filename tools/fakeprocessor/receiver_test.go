package fakeprocessor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testwait"
)

// receiver is a webhook endpoint on a real HTTP server. It verifies each
// delivery with its own secrets and keeps it, then lets answer reply to the
// n-th delivery (from 1); with no answer it replies 200.
type receiver struct {
	secrets signing.Secrets
	answer  func(w http.ResponseWriter, n int)
	server  *httptest.Server

	mu  sync.Mutex
	got []delivery
}

// delivery is one webhook request as received.
type delivery struct {
	method, path string
	header       http.Header
	body         []byte
	at           time.Time
	// err is the verification's error, nil for a genuine delivery.
	err error
}

// newReceiver starts a receiver holding secrets; it stops when t ends.
func newReceiver(t *testing.T, secrets signing.Secrets, answer func(w http.ResponseWriter, n int)) *receiver {
	t.Helper()
	r := &receiver{secrets: secrets, answer: answer}
	r.server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.server.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	d := delivery{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), at: time.Now()}
	d.body, d.err = io.ReadAll(req.Body)
	if d.err == nil {
		_, d.err = r.secrets.Verify(d.body, req.Header, d.at)
	}
	r.mu.Lock()
	r.got = append(r.got, d)
	n := len(r.got)
	r.mu.Unlock()
	if r.answer == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	r.answer(w, n)
}

// all returns every delivery received so far.
func (r *receiver) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// byID returns the deliveries of the event id, by their webhook-id.
func (r *receiver) byID(id string) []delivery {
	var out []delivery
	for _, d := range r.all() {
		if d.header.Get(signing.HeaderID) == id {
			out = append(out, d)
		}
	}
	return out
}

// newSecrets parses secrets, for a processor or a receiver.
func newSecrets(t *testing.T, secrets ...string) signing.Secrets {
	t.Helper()
	s, err := signing.ParseSecrets(strings.Join(secrets, ","))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// webhookConfig sends webhooks to r signed with secrets, polling and
// retrying fast.
func webhookConfig(r *receiver, secrets signing.Secrets) fakeprocessor.Config {
	return fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{
		URL:          r.server.URL + "/webhooks",
		Secrets:      secrets,
		PollInterval: 20 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond,
	}}
}

// newWebhookEnv starts a receiver answering with answer (nil: 200) and a
// processor sending it webhooks, its webhookConfig first changed by
// configure (nil: unchanged).
func newWebhookEnv(t *testing.T, answer func(w http.ResponseWriter, n int), configure func(*fakeprocessor.Config)) (*env, *receiver) {
	t.Helper()
	secrets := newSecrets(t, signing.NewSecret())
	r := newReceiver(t, secrets, answer)
	cfg := webhookConfig(r, secrets)
	if configure != nil {
		configure(&cfg)
	}
	return newEnv(t, cfg), r
}

// seq returns a Rand giving vals in order, then the last one forever.
func seq(vals ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		v := vals[0]
		if len(vals) > 1 {
			vals = vals[1:]
		}
		return v
	}
}

// eventRow is a row of processor.webhook_events.
type eventRow struct {
	state       string
	attempts    int
	createdAt   time.Time
	nextAttempt *time.Time
	deliveredAt *time.Time
	lastError   *string
}

// event reads the row of the event id.
func (e *env) event(t *testing.T, id string) eventRow {
	t.Helper()
	var r eventRow
	err := e.db.Pool.QueryRow(context.Background(), `
		SELECT state, attempts, created_at, next_attempt_at, delivered_at, last_error
		FROM processor.webhook_events WHERE id = $1`, id).
		Scan(&r.state, &r.attempts, &r.createdAt, &r.nextAttempt, &r.deliveredAt, &r.lastError)
	if err != nil {
		t.Fatalf("event %s: %v", id, err)
	}
	return r
}

// eventsUnder returns the ids of the events whose object was made (or
// refused) under an idempotency key, oldest first.
func (e *env) eventsUnder(t *testing.T, key string) []string {
	t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `
		SELECT id FROM processor.webhook_events
		WHERE convert_from(body, 'UTF8')::jsonb #>> '{data,object,idempotency_key}' = $1
		ORDER BY created_at, id`, key)
	if err != nil {
		t.Fatalf("events under %s: %v", key, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("events under %s: %v", key, err)
	}
	return ids
}

// waitState waits until the one event under key is in state and returns
// its id.
func waitState(t *testing.T, e *env, key, state string) string {
	t.Helper()
	var id string
	testwait.For(t, "the event under "+key+" "+state, func() bool {
		ids := e.eventsUnder(t, key)
		if len(ids) != 1 {
			return false
		}
		id = ids[0]
		return e.event(t, id).state == state
	})
	return id
}

// waitDelivered waits until the one event under key is delivered and
// returns its id and the deliveries the receiver got of it.
func waitDelivered(t *testing.T, e *env, r *receiver, key string) (string, []delivery) {
	t.Helper()
	id := waitState(t, e, key, "delivered")
	return id, r.byID(id)
}

// checkDelivery checks that d is a genuine, well-formed delivery of an event
// of type typ, and returns its body.
func checkDelivery(t *testing.T, d delivery, typ string) fakeprocessor.EventBody {
	t.Helper()
	if d.err != nil {
		t.Fatalf("delivery not verified: %v", d.err)
	}
	if d.method != http.MethodPost || d.path != "/webhooks" || d.header.Get("Content-Type") != "application/json" {
		t.Errorf("delivery is %s %s with content-type %q", d.method, d.path, d.header.Get("Content-Type"))
	}
	// Exactly these members, and data holds only the object.
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(d.body, &shape); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(shape["data"], &data); err != nil || len(shape) != 4 || len(data) != 1 || data["object"] == nil ||
		shape["id"] == nil || shape["type"] == nil || shape["created"] == nil {
		t.Errorf("body shape: %s", d.body)
	}
	var b fakeprocessor.EventBody
	if err := json.Unmarshal(d.body, &b); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	if b.Type != typ || !strings.HasPrefix(b.ID, "evt_") || len(b.ID) != len("evt_")+24 || b.ID != d.header.Get(signing.HeaderID) {
		t.Errorf("event %s, type %s, webhook-id %s; want type %s", b.ID, b.Type, d.header.Get(signing.HeaderID), typ)
	}
	if age := time.Since(time.Unix(b.Created, 0)); age < -time.Second || age > time.Minute {
		t.Errorf("created %d is %v ago", b.Created, age)
	}
	return b
}

// sameJSON fails t unless the object is, byte for byte, the answer of a GET
// (which ends with a newline).
func sameJSON(t *testing.T, object json.RawMessage, answer []byte) {
	t.Helper()
	if !bytes.Equal(object, bytes.TrimSuffix(answer, []byte("\n"))) {
		t.Errorf("object = %s\nwant     %s", object, answer)
	}
}

// checkDeliveries checks that ds are n deliveries, each genuine and
// well-formed, of an event of type typ, and returns their bodies.
func checkDeliveries(t *testing.T, ds []delivery, typ string, n int) []fakeprocessor.EventBody {
	t.Helper()
	if len(ds) != n {
		t.Fatalf("%d deliveries, want %d", len(ds), n)
	}
	bodies := make([]fakeprocessor.EventBody, len(ds))
	for i, d := range ds {
		bodies[i] = checkDelivery(t, d, typ)
	}
	return bodies
}

// onlyDelivery waits for the one event under key, checks that it was
// delivered once, as typ, and returns its body.
func onlyDelivery(t *testing.T, e *env, r *receiver, key, typ string) fakeprocessor.EventBody {
	t.Helper()
	_, ds := waitDelivered(t, e, r, key)
	return checkDeliveries(t, ds, typ, 1)[0]
}
