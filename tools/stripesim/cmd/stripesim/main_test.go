package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRun: the command serves the simulator on the address it is given,
// names it first, and stops when its context ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{"STRIPESIM_ADDR": "127.0.0.1:0"}
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, func(k string) string { return env[k] }, w)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the address: %v", err)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "stripesim listening on ")
	if !ok {
		t.Fatalf("first line %q does not name the address", line)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/payment_intents", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk_test_cmd")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"object":"list"`) {
		t.Errorf("GET /v1/payment_intents = %d %s; want an empty list", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return once its context ended")
	}
}

// TestRunRefuses: a bad setting is an error, before anything listens.
func TestRunRefuses(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"RateLimit":     {"STRIPESIM_RATE_LIMIT": "fast"},
		"WebhookSecret": {"STRIPESIM_WEBHOOK_URL": "http://127.0.0.1:1/hooks", "STRIPESIM_WEBHOOK_SECRET": "secret"},
	} {
		if err := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard); err == nil {
			t.Errorf("%s: run took %v", name, env)
		}
	}
}
