package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serving runs the command with env until the test ends, and returns its
// address.
func serving(t *testing.T, env map[string]string) string {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, w)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return once its context ended")
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "stripesim listening on ")
	if !ok {
		t.Fatalf("first line %q does not name the address", line)
	}
	return base
}

// do sends method path to base with Stripe's key, and returns the status
// and body; err is the transport's.
func do(base, method, path string) (int, string, error) {
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer sk_test_cmd")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestRun: the command serves Stripe's API and the routes of the run that
// drives it: its state, and an outage during which nothing is answered.
// Setenv: not parallel.
func TestRun(t *testing.T) {
	base := serving(t, map[string]string{"STRIPESIM_ADDR": "127.0.0.1:0"})
	if status, body, err := do(base, http.MethodPost, "/v1/customers?description=x"); err != nil || status != http.StatusOK {
		t.Fatalf("POST /v1/customers = %d %s %v", status, body, err)
	}
	status, body, err := do(base, http.MethodGet, "/_sim/state")
	var state State
	if err != nil || status != http.StatusOK || json.Unmarshal([]byte(body), &state) != nil || state.Stats.Requests != 1 {
		t.Fatalf("GET /_sim/state = %d %s %v", status, body, err)
	}
	if status, _, err := do(base, http.MethodPost, "/_sim/outage?for=1h"); err != nil || status != http.StatusNoContent {
		t.Fatalf("POST /_sim/outage = %d %v", status, err)
	}
	if _, _, err := do(base, http.MethodGet, "/v1/payment_intents"); err == nil {
		t.Fatal("answered during an outage")
	}
	if status, _, err := do(base, http.MethodPost, "/_sim/outage?for=0s"); err != nil || status != http.StatusNoContent {
		t.Fatalf("ending the outage = %d %v", status, err)
	}
	if status, body, err := do(base, http.MethodGet, "/v1/payment_intents"); err != nil || status != http.StatusOK || !strings.Contains(body, `"object":"list"`) {
		t.Fatalf("GET /v1/payment_intents after the outage = %d %s %v", status, body, err)
	}
}

// TestSettings: -h lists the settings; a fault not known, or a bad rate, is
// refused before anything listens.
func TestSettings(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "STRIPESIM_FAULTS") {
		t.Fatalf("-h = %v:\n%s", err, out.String())
	}
	for _, faults := range []string{"fire=0.1", "500-saved", "429=x", "latency=2"} {
		t.Setenv("STRIPESIM_FAULTS", faults)
		t.Setenv("STRIPESIM_ADDR", "127.0.0.1:0")
		if err := run(context.Background(), nil, io.Discard); err == nil {
			t.Errorf("STRIPESIM_FAULTS=%s: taken", faults)
		}
	}
}
