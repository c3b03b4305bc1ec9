// Package stripemock runs Stripe's own mock of its API for tests
// (github.com/stripe/stripe-mock): it validates every request against
// Stripe's OpenAPI document, answers a 400 to one Stripe would refuse, and
// answers the rest with its fixtures, keeping no state. Recorder stands in
// front of it and notes what each request got.
package stripemock

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/tools/freeport"
	"github.com/example/payments/tools/testio"
)

// Module is the stripe-mock installed when none is found.
const Module = "github.com/stripe/stripe-mock@v0.203.0"

// APIKey is a key the mock takes: it checks the form, not the account.
const APIKey = "sk_test_123"

var (
	installOnce sync.Once
	installErr  error
)

// Binary finds stripe-mock: on PATH, in $(go env GOBIN) or
// $(go env GOPATH)/bin, or installed there by go install, tried once.
func Binary() (string, error) {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	// One line each, GOBIN's empty when unset.
	gobin, gopath, _ := strings.Cut(string(out), "\n")
	dir := strings.TrimSpace(gobin)
	if paths := filepath.SplitList(strings.TrimSpace(gopath)); dir == "" && len(paths) > 0 {
		dir = filepath.Join(paths[0], "bin")
	}
	bin := filepath.Join(dir, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	installOnce.Do(func() {
		out, err := exec.Command("go", "install", Module).CombinedOutput()
		if err != nil {
			installErr = fmt.Errorf("go install %s: %w: %s", Module, err, bytes.TrimSpace(out))
		}
	})
	if installErr != nil {
		return "", installErr
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("installed %s, but %s is not there: %w", Module, bin, err)
	}
	return bin, nil
}

// Start runs stripe-mock for the test on a free port and returns its URL
// once it answers; it is killed when the test ends. The test is skipped,
// saying why, when stripe-mock can be neither found nor installed.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skipf("stripe-mock is not on PATH nor in GOPATH/bin, and cannot be installed (%v): go install %s", err, Module)
	}
	// A free port can be taken between asking for it and the mock binding
	// it: try again with another.
	for range 3 {
		if u, ok := run(t, bin); ok {
			return u
		}
	}
	t.Fatal("stripe-mock did not start")
	return ""
}

// run starts stripe-mock on a free port and waits until it answers; ok is
// false when it exited first. -http-port serves HTTP alone (-http-addr
// would also open HTTPS on 12112, one port for every test).
func run(t testing.TB, bin string) (string, bool) {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	var output testio.Buffer
	cmd := exec.Command(bin, "-http-port", port)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		select {
		case <-exited:
			t.Logf("stripe-mock exited: %s", output.String())
			return "", false
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/payment_intents/pi_ready", nil)
		req.Header.Set("Authorization", "Bearer "+APIKey)
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, true
			}
		}
	}
	t.Fatalf("stripe-mock did not answer in 30s: %s", output.String())
	return "", false
}

// Call is one request the mock answered, as a Recorder saw it.
type Call struct {
	// Route is "METHOD /path".
	Route          string
	IdempotencyKey string
	Status         int
}

// Recorder is a proxy in front of the mock that notes every answer.
type Recorder struct {
	// URL is where to send what the mock should answer.
	URL string

	mu    sync.Mutex
	calls []Call
}

// NewRecorder starts a Recorder in front of the mock at base, closed when
// the test ends.
func NewRecorder(t testing.TB, base string) *Recorder {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{}
	tr := &http.Transport{}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:      tr,
		ModifyResponse: r.record,
	})
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	r.URL = srv.URL
	return r
}

// record is the proxy's ModifyResponse: it notes resp.
func (r *Recorder) record(resp *http.Response) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, Call{Route: resp.Request.Method + " " + resp.Request.URL.Path,
		IdempotencyKey: resp.Request.Header.Get("Idempotency-Key"), Status: resp.StatusCode})
	return nil
}

// Calls are the answers so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}
