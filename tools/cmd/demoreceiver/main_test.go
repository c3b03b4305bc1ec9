package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/webhook"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"LOG_FORMAT", "RECEIVER_ADDR", "RECEIVER_PATH", "RECEIVER_SECRET",
		"RECEIVER_DEDUPE_FILE", "RECEIVER_FAIL_FIRST"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not list %s:\n%s", name, out.String())
		}
	}
}

func TestRunRequiresSecret(t *testing.T) {
	t.Setenv("RECEIVER_SECRET", "")
	os.Unsetenv("RECEIVER_SECRET") // t.Setenv restores it afterwards
	t.Setenv("RECEIVER_ADDR", "127.0.0.1:0")
	t.Setenv("RECEIVER_DEDUPE_FILE", filepath.Join(t.TempDir(), "seen.log"))
	if err := run(context.Background(), nil, &testio.Buffer{}); err == nil || !strings.Contains(err.Error(), "RECEIVER_SECRET") {
		t.Fatalf("err = %v, want one naming RECEIVER_SECRET", err)
	}
}

// TestRunServes starts the program as main does, delivers one signed event
// to it, finds the event's line on stdout, and stops it.
func TestRunServes(t *testing.T) {
	secret := webhook.NewSecret()
	t.Setenv("RECEIVER_SECRET", secret)
	t.Setenv("RECEIVER_ADDR", "127.0.0.1:0")
	t.Setenv("RECEIVER_DEDUPE_FILE", filepath.Join(t.TempDir(), "seen.log"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testio.Buffer{}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, nil, out) }()

	var addr string
	testwait.For(t, "the listening line", func() bool {
		addr = listening(out.String())
		return addr != ""
	})
	s, err := webhook.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_main","object":"event","type":"payment.succeeded","data":{"object":{"id":"pay_1","status":"succeeded"}},"created_at":"2025-01-01T00:00:00Z"}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks", bytes.NewReader(body))
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
	if !strings.Contains(out.String(), "\nevent evt_main payment.succeeded pay_1 succeeded\n") {
		t.Fatalf("stdout lacks the event line:\n%s", out)
	}
	if strings.Contains(out.String(), "whsec_") {
		t.Fatalf("stdout shows the secret:\n%s", out)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
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
