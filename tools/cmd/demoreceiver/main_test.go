package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/cmdtest"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	cmdtest.Help(t, run, "LOG_FORMAT", "RECEIVER_ADDR", "RECEIVER_PATH", "RECEIVER_SECRET",
		"RECEIVER_DEDUPE_FILE", "RECEIVER_FAIL_FIRST")
}

func TestRunRequiresSecret(t *testing.T) {
	t.Setenv("RECEIVER_SECRET", "")
	os.Unsetenv("RECEIVER_SECRET") // t.Setenv restores it afterwards
	t.Setenv("RECEIVER_ADDR", "127.0.0.1:0")
	t.Setenv("RECEIVER_DEDUPE_FILE", filepath.Join(t.TempDir(), "seen.log"))
	cmdtest.Refuses(t, run, "RECEIVER_SECRET")
}

// running is the program started as main starts it, in the environment the
// test set.
type running struct {
	addr   string // where it listens
	out    *testio.Buffer
	cancel context.CancelFunc
	errc   chan error
}

// start starts the program on a free port, with a dedupe file of its own,
// and waits for its listening line. The test's end stops it, if the test
// has not.
func start(t *testing.T) *running {
	t.Helper()
	t.Setenv("RECEIVER_ADDR", "127.0.0.1:0")
	t.Setenv("RECEIVER_DEDUPE_FILE", filepath.Join(t.TempDir(), "seen.log"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &running{out: &testio.Buffer{}, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- run(ctx, nil, r.out) }()
	testwait.For(t, "the listening line", func() bool {
		r.addr = listening(r.out.String())
		return r.addr != ""
	})
	return r
}

// stop ends the program as SIGTERM does and fails t unless it returns nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	r.cancel()
	if err := <-r.errc; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRunServes starts the program as main does, delivers one signed event
// to it, finds the event's line on stdout, and stops it.
func TestRunServes(t *testing.T) {
	secret := signing.NewSecret()
	t.Setenv("RECEIVER_SECRET", secret)
	r := start(t)
	s, err := signing.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_main","object":"event","type":"payment.succeeded","data":{"object":{"id":"pay_1","status":"succeeded"}},"created_at":"2025-01-01T00:00:00Z"}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+"/webhooks", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(req.Header, "evt_main", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery: %s", resp.Status)
	}
	if !strings.Contains(r.out.String(), "\nevent evt_main payment.succeeded pay_1 succeeded\n") {
		t.Fatalf("stdout lacks the event line:\n%s", r.out)
	}
	if strings.Contains(r.out.String(), "whsec_") {
		t.Fatalf("stdout shows the secret:\n%s", r.out)
	}
	r.stop(t)
}

// listening finds the address in the "listening" log line, or "".
func listening(out string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
			return rec.Addr
		}
	}
	return ""
}

// TestRunTraces: with OTEL_TRACES_EXPORTER=console, a delivery is a span on
// stdout in the trace its traceparent names, flushed when run returns; a
// health check makes none.
func TestRunTraces(t *testing.T) {
	t.Setenv("RECEIVER_SECRET", signing.NewSecret())
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_PROPAGATORS", "")
	r := start(t)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, path := range []string{"/healthz", "/webhooks"} {
		req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if path == "/healthz" {
			req.Method = http.MethodGet
		}
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	r.stop(t)
	var spans []string
	sc := bufio.NewScanner(strings.NewReader(r.out.String()))
	for sc.Scan() {
		var span struct {
			Name        string
			SpanContext struct{ TraceID string }
		}
		if json.Unmarshal(sc.Bytes(), &span) == nil && span.Name != "" {
			spans = append(spans, span.Name+" "+span.SpanContext.TraceID)
		}
	}
	if want := "POST /webhooks " + traceID; len(spans) != 1 || spans[0] != want {
		t.Fatalf("spans %q, want one, %q\n%s", spans, want, r.out)
	}
}
