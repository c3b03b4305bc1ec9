package processor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// findLine returns the first JSON log line in logs with the message msg.
func findLine(logs *testio.Buffer, msg string) (map[string]any, bool) {
	dec := json.NewDecoder(strings.NewReader(logs.String()))
	for {
		var line map[string]any
		if dec.Decode(&line) != nil {
			return nil, false
		}
		if line["msg"] == msg {
			return line, true
		}
	}
}

// testConfig is the processor's default configuration, on free ports.
func testConfig(t *testing.T) Config {
	t.Helper()
	var cfg Config
	if err := envconfig.Process("payments_processor_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.InternalAddr = "127.0.0.1:0", "127.0.0.1:0"
	return cfg
}

// start builds the processor from cfg, logging JSON lines to logs, and runs
// it until stop, or the end of the test; stop returns what Run returned.
func start(t *testing.T, cfg Config, logs *testio.Buffer) (p *Processor, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, cfg, process.NewLogger(logs, "json", slog.LevelInfo))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	return p, stop
}

// get GETs url and returns the answer's status and body.
func get(t *testing.T, client *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// postCharge charges 100 USD to method under key at the processor at base,
// and returns the answer's status.
func postCharge(client *http.Client, base, key, method string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/charges",
		strings.NewReader(`{"amount":100,"currency":"USD","payment_method":"`+method+`"}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestProcessor builds the processor process on a free port, charges through
// it, and shuts it down while a pm_card_timeout request is held: the held
// request is answered as soon as shutdown starts.
func TestProcessor(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := testConfig(t)
	cfg.DatabaseURL, cfg.TimeoutHang = db.URL, time.Hour
	logs := &testio.Buffer{}
	p, stop := start(t, cfg, logs)
	base := "http://" + p.Addr()
	if line, ok := findLine(logs, "configuration"); !ok || line["TimeoutHang"] != "1h0m0s" || line["DatabaseURL"] == nil {
		t.Errorf("configuration line = %v", line)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	if status, _ := get(t, client, base+"/healthz"); status != http.StatusOK {
		t.Fatalf("healthz = %d", status)
	}
	// Metrics are on the internal listener, never the public port.
	if status, _ := get(t, client, base+"/metrics"); status != http.StatusNotFound {
		t.Fatalf("public /metrics = %d", status)
	}
	status, metrics := get(t, client, "http://"+p.InternalAddr()+"/metrics")
	if status != http.StatusOK || !strings.Contains(string(metrics), `fakeprocessor_webhook_events{state="pending"} 0`) {
		t.Fatalf("internal /metrics = %d\n%s", status, metrics)
	}

	held := make(chan int, 1)
	go func() {
		status, err := postCharge(client, base, "held", "pm_card_timeout")
		if err != nil {
			t.Errorf("held request: %v", err)
		}
		held <- status
	}()
	testwait.For(t, "the held charge", func() bool {
		var n int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM processor.charges WHERE idempotency_key = 'held'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if status := <-held; status != http.StatusOK {
		t.Errorf("held request status = %d, want 200", status)
	}
	if line, ok := findLine(logs, "request"); !ok || line["request_id"] == "" {
		t.Errorf("access log line = %v", line)
	}
}

// TestProcessorWebhooks builds the processor with webhooks signed by two
// secrets, as during a rotation: the configuration log shows them masked, a
// charge's webhook arrives, and a receiver holding either secret verifies it.
func TestProcessorWebhooks(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	old, current := signing.NewSecret(), signing.NewSecret()
	type received struct {
		header http.Header
		body   []byte
	}
	got := make(chan received, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), body}
	}))
	defer receiver.Close()

	cfg := testConfig(t)
	cfg.DatabaseURL, cfg.WebhookURL = db.URL, receiver.URL
	if err := cfg.WebhookSecret.Decode(old + "," + current); err != nil {
		t.Fatal(err)
	}
	logs := &testio.Buffer{}
	p, stop := start(t, cfg, logs)
	if line, ok := findLine(logs, "configuration"); !ok || line["WebhookSecret"] != "(2 secrets)" ||
		line["WebhookURL"] != receiver.URL || line["WebhookRetryHorizon"] != "72h0m0s" {
		t.Errorf("configuration line = %v", line)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	if status, err := postCharge(client, "http://"+p.Addr(), "webhooked", "pm_card_visa"); err != nil || status != http.StatusOK {
		t.Fatalf("charge: %d, %v", status, err)
	}

	var r received
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook within 20s")
	}
	for name, secret := range map[string]string{"old": old, "new": current} {
		s, err := signing.ParseSecrets(secret)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(r.body, r.header, time.Now()); err != nil {
			t.Errorf("the %s secret does not verify: %v", name, err)
		}
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Object struct {
				IdempotencyKey string `json:"idempotency_key"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != "charge.succeeded" || ev.Data.Object.IdempotencyKey != "webhooked" {
		t.Errorf("webhook %s: %v", r.body, err)
	}
	testwait.For(t, "the attempt's log line", func() bool {
		line, ok := findLine(logs, "webhook attempt")
		return ok && line["event_id"] == ev.ID && line["status"] == float64(http.StatusOK)
	})

	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if strings.Contains(logs.String(), "whsec_") {
		t.Error("a secret is in the logs")
	}
}

// TestNewRefusesUnsignedWebhooks checks that a webhook URL needs a secret.
func TestNewRefusesUnsignedWebhooks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.WebhookURL = "http://127.0.0.1:1/webhooks"
	_, err := New(context.Background(), cfg, process.NewLogger(io.Discard, "json", slog.LevelInfo))
	if err == nil || !strings.Contains(err.Error(), "PROCESSOR_WEBHOOK_SECRET") {
		t.Errorf("New = %v, want a refusal naming PROCESSOR_WEBHOOK_SECRET", err)
	}
}
