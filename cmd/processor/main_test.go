package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/testdb"
	"github.com/example/payments/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// logLines collects the JSON log lines run writes, safely for concurrent use.
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

// TestRun starts the real program on a free port, charges through it, and
// shuts it down while a pm_card_timeout request is held. run reads the
// process environment, so this test sets it and cannot run in parallel.
func TestRun(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("PROCESSOR_ADDR", "127.0.0.1:0")
	t.Setenv("PROCESSOR_TIMEOUT_HANG", "1h")
	t.Setenv("PROCESSOR_FAIL_RATE", "0")
	t.Setenv("PROCESSOR_DROP_RATE", "0")
	t.Setenv("PROCESSOR_LATENCY", "0s")
	t.Setenv("PROCESSOR_EXEC_LATENCY", "0s")
	t.Setenv("PROCESSOR_KEY_RETENTION", "168h")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logLines{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, logs) }()

	var base string
	testwait.For(t, "the listening log line", func() bool {
		line, ok := logs.find("listening")
		if ok {
			base = "http://" + line["addr"].(string)
		}
		return ok
	})
	if line, ok := logs.find("configuration"); !ok || line["TimeoutHang"] != "1h0m0s" {
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

	// A held request is answered as soon as shutdown starts.
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

func TestRunHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"DATABASE_URL", "PROCESSOR_ADDR", "PROCESSOR_FAIL_RATE", "PROCESSOR_DROP_RATE",
		"PROCESSOR_LATENCY", "PROCESSOR_EXEC_LATENCY", "PROCESSOR_TIMEOUT_HANG", "PROCESSOR_KEY_RETENTION"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not list %s:\n%s", name, out.String())
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	db := testdb.New(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("PROCESSOR_ADDR", "127.0.0.1:0")
	t.Setenv("PROCESSOR_FAIL_RATE", "2")
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "fail rate") {
		t.Errorf("err = %v, want a fail rate error", err)
	}
}
