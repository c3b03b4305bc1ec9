package processor

import (
	"bufio"
	"bytes"
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
	"github.com/example/payments/internal/webhook"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logLines collects JSON log lines, safely for concurrent use.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the first log line with the message msg.
func (l *logLines) find(msg string) (map[string]any, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
			return line, true
		}
	}
	return nil, false
}

// TestProcessor builds the processor process on a free port, charges through
// it, and shuts it down while a pm_card_timeout request is held: the held
// request is answered as soon as shutdown starts.
func TestProcessor(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var cfg Config
	if err := envconfig.Process("payments_processor_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.Addr, cfg.InternalAddr, cfg.TimeoutHang = db.URL, "127.0.0.1:0", "127.0.0.1:0", time.Hour

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logLines{}
	p, err := New(ctx, cfg, process.NewLogger(logs, "json", slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	base := "http://" + p.Addr()
	if line, ok := logs.find("configuration"); !ok || line["TimeoutHang"] != "1h0m0s" || line["DatabaseURL"] == nil {
		t.Errorf("configuration line = %v", line)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz = %d", resp.StatusCode)
	}
	// Metrics are on the internal listener, never the public port.
	if resp, err = client.Get(base + "/metrics"); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("public /metrics = %d", resp.StatusCode)
	}
	if resp, err = client.Get("http://" + p.InternalAddr() + "/metrics"); err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(metrics), `fakeprocessor_webhook_events{state="pending"} 0`) {
		t.Fatalf("internal /metrics = %d\n%s", resp.StatusCode, metrics)
	}

	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/charges",
			strings.NewReader(`{"amount":100,"currency":"USD","payment_method":"pm_card_timeout"}`))
		req.Header.Set("Idempotency-Key", "held")
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("held request: %v", err)
			held <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	testwait.For(t, "the held charge", func() bool {
		var n int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM processor.charges WHERE idempotency_key = 'held'`).Scan(&n)
		return err == nil && n == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if status := <-held; status != http.StatusOK {
		t.Errorf("held request status = %d, want 200", status)
	}
	if line, ok := logs.find("request"); !ok || line["request_id"] == "" {
		t.Errorf("access log line = %v", line)
	}
}

// TestProcessorWebhooks builds the processor with webhooks signed by two
// secrets, as during a rotation: the configuration log shows them masked, a
// charge's webhook arrives, and a receiver holding either secret verifies it.
func TestProcessorWebhooks(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	old, current := webhook.NewSecret(), webhook.NewSecret()
	onlyOld, err := webhook.ParseSecrets(old)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, err := webhook.ParseSecrets(current)
	if err != nil {
		t.Fatal(err)
	}
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

	var cfg Config
	if err := envconfig.Process("payments_processor_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.Addr, cfg.InternalAddr, cfg.WebhookURL = db.URL, "127.0.0.1:0", "127.0.0.1:0", receiver.URL
	if err := cfg.WebhookSecret.Decode(old + "," + current); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logLines{}
	p, err := New(ctx, cfg, process.NewLogger(logs, "json", slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if line, ok := logs.find("configuration"); !ok || line["WebhookSecret"] != "(2 secrets)" ||
		line["WebhookURL"] != receiver.URL || line["WebhookRetryHorizon"] != "72h0m0s" {
		t.Errorf("configuration line = %v", line)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/v1/charges",
		strings.NewReader(`{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`))
	req.Header.Set("Idempotency-Key", "webhooked")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("charge status = %d", resp.StatusCode)
	}

	var r received
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook within 20s")
	}
	for name, s := range map[string]webhook.Secrets{"old": onlyOld, "new": onlyNew} {
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
		line, ok := logs.find("webhook attempt")
		return ok && line["event_id"] == ev.ID && line["status"] == float64(http.StatusOK)
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	logs.mu.Lock()
	leaked := strings.Contains(logs.buf.String(), "whsec_")
	logs.mu.Unlock()
	if leaked {
		t.Error("a secret is in the logs")
	}
}

// TestNewRefusesUnsignedWebhooks checks that a webhook URL needs a secret.
func TestNewRefusesUnsignedWebhooks(t *testing.T) {
	t.Parallel()
	var cfg Config
	if err := envconfig.Process("payments_processor_test_unset", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.InternalAddr, cfg.WebhookURL = "127.0.0.1:0", "127.0.0.1:0", "http://127.0.0.1:1/webhooks"
	_, err := New(context.Background(), cfg, process.NewLogger(io.Discard, "json", slog.LevelInfo))
	if err == nil || !strings.Contains(err.Error(), "PROCESSOR_WEBHOOK_SECRET") {
		t.Errorf("New = %v, want a refusal naming PROCESSOR_WEBHOOK_SECRET", err)
	}
}
