package processor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/testdb"
	"github.com/example/payments/internal/testwait"
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
	cfg.DatabaseURL, cfg.Addr, cfg.TimeoutHang = db.URL, "127.0.0.1:0", time.Hour

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
