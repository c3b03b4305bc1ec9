package demoreceiver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/demoreceiver"
	"github.com/example/payments/tools/testio"
)

// env is one receiver on a real HTTP server.
type env struct {
	t    *testing.T
	cfg  demoreceiver.Config
	rcv  *demoreceiver.Receiver
	srv  *httptest.Server
	out  *testio.Buffer
	logs *testio.Buffer
}

// testSecrets verify as the program does (demoreceiver.Secrets), and sign
// with the service's own signer (internal/webhook), so that every delivery
// in these tests is one the real sender would make.
type testSecrets struct {
	demoreceiver.Secrets
	signer signing.Secrets
}

// secrets parses s, a comma-separated list of secrets.
func secrets(t *testing.T, s string) testSecrets {
	t.Helper()
	verifier, err := demoreceiver.ParseSecrets(s)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signing.ParseSecrets(s)
	if err != nil {
		t.Fatal(err)
	}
	return testSecrets{Secrets: verifier, signer: signer}
}

// testConfig holds secret and a dedupe file of the test's own.
func testConfig(t *testing.T, secret string) demoreceiver.Config {
	return demoreceiver.Config{
		LogFormat:  "json",
		Addr:       "127.0.0.1:0",
		Path:       "/webhooks",
		Secret:     secrets(t, secret),
		DedupeFile: filepath.Join(t.TempDir(), "seen.log"),
	}
}

// start serves a receiver made from cfg until the test ends; setup, if
// any, is called before it serves.
func start(t *testing.T, cfg demoreceiver.Config, setup ...func(*demoreceiver.Receiver)) *env {
	t.Helper()
	e := &env{t: t, cfg: cfg, out: &testio.Buffer{}, logs: &testio.Buffer{}}
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(e.logs, t.Output()), nil))
	rcv, err := demoreceiver.New(cfg, logger, e.out)
	if err != nil {
		t.Fatalf("new receiver: %v", err)
	}
	e.rcv = rcv
	for _, f := range setup {
		f(rcv)
	}
	e.srv = httptest.NewServer(rcv)
	t.Cleanup(e.stop)
	return e
}

// stop closes the server, then the receiver; it may be called twice.
func (e *env) stop() {
	e.srv.Close()
	_ = e.rcv.Close()
}

// eventBody is a payment event with the id id.
func eventBody(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"payment.succeeded",`+
		`"data":{"object":{"id":"pay_%s","object":"payment","status":"succeeded","amount":1000}},`+
		`"created_at":"2025-01-01T00:00:00Z"}`, id, id)
}

// signed is a delivery of body as the webhook id, signed with s (made by
// secrets) at at.
func signed(t *testing.T, s demoreceiver.Verifier, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if err := s.(testSecrets).signer.Sign(h, id, at, body); err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends body with headers h and returns the status and the answer.
func (e *env) post(h http.Header, body []byte) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+e.cfg.Path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header = h
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(answer))
}

// deliver sends the event id signed now with the receiver's own secrets.
func (e *env) deliver(id string) (int, string) {
	e.t.Helper()
	body := eventBody(id)
	return e.post(signed(e.t, e.cfg.Secret, id, time.Now(), body), body)
}

// printed counts the lines printed for the event id.
func (e *env) printed(id string) int {
	return strings.Count(e.out.String(), "event "+id+" ")
}

// recorded is the dedupe file's content, one id a line.
func (e *env) recorded() string {
	e.t.Helper()
	data, err := os.ReadFile(e.cfg.DedupeFile)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// wantProcessed delivers the event id, and fails unless it is accepted,
// printed in the documented format as the only line on stdout, and the
// dedupe file then reads recorded.
func (e *env) wantProcessed(id, recorded string) {
	e.t.Helper()
	if status, answer := e.deliver(id); status != http.StatusOK || answer != accepted {
		e.t.Fatalf("delivery of %s: %d %s", id, status, answer)
	}
	if got, want := e.out.String(), "event "+id+" payment.succeeded pay_"+id+" succeeded\n"; got != want {
		e.t.Fatalf("stdout = %q, want %q", got, want)
	}
	if got := e.recorded(); got != recorded {
		e.t.Fatalf("dedupe file = %q, want %q", got, recorded)
	}
}

const (
	accepted  = `{"received":true}`
	duplicate = `{"received":true,"duplicate":true}`
)

// TestAcceptOnce: a genuine delivery is printed, in the documented format,
// and recorded; the same event delivered again is a 200 that prints
// nothing.
func TestAcceptOnce(t *testing.T) {
	t.Parallel()
	e := start(t, testConfig(t, signing.NewSecret()))
	e.wantProcessed("evt_1", "evt_1\n")
	if status, answer := e.deliver("evt_1"); status != http.StatusOK || answer != duplicate {
		t.Fatalf("second delivery: %d %s", status, answer)
	}
	if n := e.printed("evt_1"); n != 1 {
		t.Fatalf("printed %d times:\n%s", n, e.out)
	}
	if got := e.recorded(); got != "evt_1\n" || e.rcv.Seen() != 1 {
		t.Fatalf("after the duplicate: file %q, seen %d", got, e.rcv.Seen())
	}
}

// TestRefused: a delivery that is not genuine, or not an event, is a 400
// that prints and records nothing.
func TestRefused(t *testing.T) {
	t.Parallel()
	e := start(t, testConfig(t, signing.NewSecret()))
	other := secrets(t, signing.NewSecret())
	now := time.Now()
	body := eventBody("evt_x")
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		reason string
	}{
		{"Forged", signed(t, other, "evt_x", now, body), body, "invalid signature"},
		{"Stale", signed(t, e.cfg.Secret, "evt_x", now.Add(-6*time.Minute), body), body, "timestamp too old or too new"},
		{"FromTheFuture", signed(t, e.cfg.Secret, "evt_x", now.Add(6*time.Minute), body), body, "timestamp too old or too new"},
		// Stale is only ever said of a genuine delivery.
		{"ForgedStale", signed(t, other, "evt_x", now.Add(-6*time.Minute), body), body, "invalid signature"},
		{"BodyChanged", signed(t, e.cfg.Secret, "evt_x", now, body), bytes.Replace(body, []byte("1000"), []byte("9000"), 1), "invalid signature"},
		{"NoHeaders", http.Header{"Content-Type": {"application/json"}}, body, "invalid signature"},
		{"NoSignature", func() http.Header {
			h := signed(t, e.cfg.Secret, "evt_x", now, body)
			h.Del(signing.HeaderSignature)
			return h
		}(), body, "invalid signature"},
		{"NotJSON", signed(t, e.cfg.Secret, "evt_x", now, []byte("evt_x")), []byte("evt_x"), "malformed event"},
		{"OtherEventID", signed(t, e.cfg.Secret, "evt_y", now, body), body, "malformed event"},
	}
	for _, c := range cases {
		status, answer := e.post(c.header, c.body)
		if status != http.StatusBadRequest || answer != fmt.Sprintf(`{"error":%q}`, c.reason) {
			t.Errorf("%s: %d %s, want 400 %q", c.name, status, answer, c.reason)
		}
	}
	if out := e.out.String(); out != "" {
		t.Errorf("printed %q", out)
	}
	if got := e.recorded(); got != "" || e.rcv.Seen() != 0 {
		t.Errorf("recorded %q, seen %d", got, e.rcv.Seen())
	}
}

// TestRotation: while a secret rotates, a receiver holding both accepts a
// delivery signed with either, and one holding either accepts a delivery
// signed with both.
func TestRotation(t *testing.T) {
	t.Parallel()
	old, current := signing.NewSecret(), signing.NewSecret()
	both := start(t, testConfig(t, old+","+current))
	for i, s := range []string{old, current} {
		id := fmt.Sprintf("evt_rot%d", i)
		body := eventBody(id)
		if status, answer := both.post(signed(t, secrets(t, s), id, time.Now(), body), body); status != http.StatusOK || answer != accepted {
			t.Errorf("receiver with both, delivery signed with secret %d: %d %s", i, status, answer)
		}
	}
	for i, s := range []string{old, current} {
		one := start(t, testConfig(t, s))
		body := eventBody("evt_both")
		if status, answer := one.post(signed(t, secrets(t, old+","+current), "evt_both", time.Now(), body), body); status != http.StatusOK || answer != accepted {
			t.Errorf("receiver with secret %d, delivery signed with both: %d %s", i, status, answer)
		}
	}
	stranger := start(t, testConfig(t, signing.NewSecret()))
	body := eventBody("evt_both")
	if status, _ := stranger.post(signed(t, secrets(t, old+","+current), "evt_both", time.Now(), body), body); status != http.StatusBadRequest {
		t.Errorf("receiver with neither secret: %d", status)
	}
}

// TestFailFirst: with FailFirst 2, the first two deliveries of each event
// are 500s that record nothing, and the third is processed.
func TestFailFirst(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, signing.NewSecret())
	cfg.FailFirst = 2
	e := start(t, cfg)
	for i := range 2 {
		if status, _ := e.deliver("evt_ff"); status != http.StatusInternalServerError {
			t.Fatalf("delivery %d: %d, want 500", i+1, status)
		}
		if e.printed("evt_ff") != 0 || e.recorded() != "" || e.rcv.Seen() != 0 {
			t.Fatalf("after failed delivery %d: printed %q, recorded %q", i+1, e.out, e.recorded())
		}
	}
	if status, answer := e.deliver("evt_ff"); status != http.StatusOK || answer != accepted {
		t.Fatalf("third delivery: %d %s", status, answer)
	}
	if status, answer := e.deliver("evt_ff"); status != http.StatusOK || answer != duplicate {
		t.Fatalf("fourth delivery: %d %s", status, answer)
	}
	if n := e.printed("evt_ff"); n != 1 || e.recorded() != "evt_ff\n" {
		t.Fatalf("printed %d times, recorded %q", n, e.recorded())
	}
	// Each event is failed on its own count.
	if status, _ := e.deliver("evt_ff2"); status != http.StatusInternalServerError {
		t.Fatalf("another event's first delivery: %d, want 500", status)
	}
	// The count survives a restart: a retry that lands on a fresh process
	// is not refused all over again.
	e.stop()
	again := start(t, cfg)
	if status, _ := again.deliver("evt_ff2"); status != http.StatusInternalServerError {
		t.Fatalf("evt_ff2's second delivery, after a restart: %d, want 500", status)
	}
	if status, answer := again.deliver("evt_ff2"); status != http.StatusOK || answer != accepted {
		t.Fatalf("evt_ff2's third delivery, after a restart: %d %s", status, answer)
	}
}

// TestBodyLimit: a body of MaxBodyBytes is read; one byte more is a 413.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := start(t, testConfig(t, signing.NewSecret()))
	pad := func(id string, size int) []byte {
		body := eventBody(id)
		return append(body, bytes.Repeat([]byte(" "), size-len(body))...)
	}
	atLimit := pad("evt_big", demoreceiver.MaxBodyBytes)
	if status, answer := e.post(signed(t, e.cfg.Secret, "evt_big", time.Now(), atLimit), atLimit); status != http.StatusOK {
		t.Fatalf("body of exactly the limit: %d %s", status, answer)
	}
	over := pad("evt_huge", demoreceiver.MaxBodyBytes+1)
	if status, answer := e.post(signed(t, e.cfg.Secret, "evt_huge", time.Now(), over), over); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit: %d %s", status, answer)
	}
	if e.printed("evt_huge") != 0 || e.recorded() != "evt_big\n" {
		t.Fatalf("the large body was taken: %q, recorded %q", e.out, e.recorded())
	}
}

// TestRoutes: the health check answers, and the webhook path takes POST
// only.
func TestRoutes(t *testing.T) {
	t.Parallel()
	e := start(t, testConfig(t, signing.NewSecret()))
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodGet, "/webhooks", http.StatusMethodNotAllowed},
		{http.MethodPost, "/elsewhere", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, nil)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

// TestConfig: New refuses settings it cannot work with, and logs the
// configuration without the secrets.
func TestConfig(t *testing.T) {
	t.Parallel()
	secret := signing.NewSecret()
	e := start(t, testConfig(t, secret+","+signing.NewSecret()))
	var logged struct {
		Msg    string
		Secret string
	}
	line, _, _ := strings.Cut(e.logs.String(), "\n")
	if err := json.Unmarshal([]byte(line), &logged); err != nil || logged.Msg != "configuration" || logged.Secret != "(2 secrets)" {
		t.Errorf("configuration line %q (%v)", line, err)
	}
	if strings.Contains(e.logs.String(), "whsec_") || strings.Contains(e.logs.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Errorf("the logs show a secret: %s", e.logs)
	}

	for _, c := range []struct {
		name   string
		change func(*demoreceiver.Config)
		want   string
	}{
		{"NoSecret", func(c *demoreceiver.Config) { c.Secret = demoreceiver.Secrets{} }, "RECEIVER_SECRET"},
		{"NilSecret", func(c *demoreceiver.Config) { c.Secret = nil }, "RECEIVER_SECRET"},
		{"Path", func(c *demoreceiver.Config) { c.Path = "webhooks" }, "RECEIVER_PATH"},
		{"FailFirst", func(c *demoreceiver.Config) { c.FailFirst = -1 }, "RECEIVER_FAIL_FIRST"},
		{"LogFormat", func(c *demoreceiver.Config) { c.LogFormat = "xml" }, "LOG_FORMAT"},
		{"LogLevel", func(c *demoreceiver.Config) { c.LogLevel = "loud" }, "LOG_LEVEL"},
		{"DedupeFileIsADirectory", func(c *demoreceiver.Config) { c.DedupeFile = t.TempDir() }, "dedupe file"},
	} {
		cfg := testConfig(t, secret)
		c.change(&cfg)
		rcv, err := demoreceiver.New(cfg, slog.New(slog.DiscardHandler), io.Discard)
		if err == nil {
			_ = rcv.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s", c.name, err, c.want)
		}
	}
}
