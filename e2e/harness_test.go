// Package e2e starts the real api, worker and processor binaries against a
// fresh database and drives them over HTTP, as a newcomer would with curl.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/freeport"
	"github.com/example/payments/tools/pgbouncer"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// binDir holds the binaries built once for all tests.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "payments-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir, "./cmd/api", "./cmd/worker", "./tools/cmd/fakeprocessor", "./tools/cmd/demoreceiver")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	if usePooler = os.Getenv("E2E_POOLER") != ""; usePooler {
		if _, err := pgbouncer.Binary(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e through the pooler (E2E_POOLER): SKIPPED, every test:", err)
			os.RemoveAll(dir)
			os.Exit(0)
		}
	}
	code := m.Run()
	if pooler != nil {
		pooler.Stop()
	}
	if poolerDir != "" {
		os.RemoveAll(poolerDir)
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// pooler, when E2E_POOLER is set (usePooler), is the PgBouncer in
// transaction mode that the API and the worker of every test reach Postgres
// through, as in production; what needs a session goes past it
// (DATABASE_SESSION_URL). It is started with the first stack.
var (
	usePooler   bool
	pooler      *pgbouncer.Bouncer
	poolerDir   string
	poolerErr   error
	poolerStart sync.Once
)

// poolerConns is its pool per test database: fewer than the API's and the
// worker's connections together, so that they wait for one another.
const poolerConns = 5

// serviceEnv is how the API and the worker reach the database of s: through
// the pooler when there is one, with the session URL past it. Started as make
// run does (startAsMakeRun), every program gets it.
func (s *stack) serviceEnv() []string {
	if !usePooler {
		return []string{s.db}
	}
	direct := strings.TrimPrefix(s.db, "DATABASE_URL=")
	poolerStart.Do(func() {
		// Not below binDir, which only its owner may enter.
		var dir string
		if dir, poolerErr = os.MkdirTemp("", "payments-e2e-pgbouncer-"); poolerErr == nil {
			poolerDir = dir
			pooler, poolerErr = pgbouncer.Start(direct, poolerConns, dir)
		}
	})
	if poolerErr != nil {
		s.t.Fatalf("start pgbouncer: %v", poolerErr)
	}
	pooled, err := pooler.URL(direct)
	if err != nil {
		s.t.Fatal(err)
	}
	return []string{"DATABASE_URL=" + pooled, "DATABASE_SESSION_URL=" + direct}
}

// process is a running binary.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *testio.Buffer
	done chan error
}

// start runs a binary with env added to the test's environment. It is
// killed when the test ends, and its output is shown if the test failed.
func start(t *testing.T, name string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, out: &testio.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(filepath.Join(binDir, name), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() || os.Getenv("E2E_LOGS") != "" {
			t.Logf("--- %s output ---\n%s", name, p.out.String())
		}
	})
	return p
}

// run runs a binary to completion and fails the test if it fails.
func run(t *testing.T, name string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("%s exited with %v after SIGTERM\n%s", p.name, err, p.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop after SIGTERM", p.name)
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitHealthy polls url until it answers 200.
func waitHealthy(t *testing.T, url string, p *process) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	testwait.Poll(t, time.Now().Add(30*time.Second), 50*time.Millisecond, func() error {
		res, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, res.Body) //nolint:errcheck
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before %s was healthy\n%s", p.name, err, url, p.out.String())
		default:
		}
		return fmt.Errorf("%s not healthy in time\n%s", url, p.out.String())
	})
}

// stack is the three binaries running against one database.
type stack struct {
	t                      *testing.T
	db                     string
	api, worker, processor *process
	receiver               *process // make run's demo receiver, when started
	apiAddr, procAddr      string
	apiURL, processorURL   string
}

// webhooksEnv is what the API and the worker need for merchant webhooks: the
// key that encrypts endpoint secrets, and endpoints on loopback allowed (a
// test's receivers are there).
var webhooksEnv = []string{"WEBHOOK_SECRETS_KEY=" + stacktest.SecretsKey, "WEBHOOK_ALLOW_PRIVATE_NETWORKS=true"}

// internalAddr gives the API's internal listener a free port: tests run
// many APIs at once.
const internalAddr = "API_INTERNAL_ADDR=127.0.0.1:0"

// Fast settings for the worker, so that retries, sweeps and reconciliation
// happen within a test's patience.
var fastWorker = []string{
	"WORKER_POLL_INTERVAL=100ms", "PROCESSOR_TIMEOUT=1s", "JOB_TIMEOUT=2s", "RETRY_BASE_DELAY=100ms",
	"RETRY_MAX_DELAY=500ms", "RECONCILE_INTERVAL=500ms", "RECONCILE_STUCK_AFTER=3s", "METRICS_ADDR=127.0.0.1:0",
}

// startStack migrates and seeds databaseURL with the api binary's commands,
// then starts the processor, the worker and the API on free ports. apiEnv,
// workerEnv and processorEnv are added to each one's environment; "{api}"
// in processorEnv is the API's URL.
func startStack(t *testing.T, databaseURL string, apiEnv, workerEnv []string, processorEnv ...string) *stack {
	t.Helper()
	db := "DATABASE_URL=" + databaseURL
	run(t, "api", []string{db}, "migrate")
	run(t, "api", []string{db, "APP_ENV=development"}, "seed")
	s := newStack(t, databaseURL)
	s.startProcessor(processorEnv...)
	s.startWorker(workerEnv...)
	s.startAPI(apiEnv...)
	return s
}

// newStack is a stack on databaseURL with its ports chosen, none of its
// programs started.
func newStack(t *testing.T, databaseURL string) *stack {
	t.Helper()
	s := &stack{t: t, db: "DATABASE_URL=" + databaseURL, procAddr: freeAddr(t), apiAddr: freeAddr(t)}
	s.apiURL, s.processorURL = "http://"+s.apiAddr, "http://"+s.procAddr
	return s
}

// startProcessor starts (or restarts) the processor, with env added, and
// waits until it is healthy. "{api}" in env is the API's URL.
func (s *stack) startProcessor(env ...string) {
	s.t.Helper()
	all := []string{s.db, "PROCESSOR_ADDR=" + s.procAddr, "PROCESSOR_INTERNAL_ADDR=127.0.0.1:0"}
	for _, e := range env {
		all = append(all, strings.ReplaceAll(e, "{api}", s.apiURL))
	}
	s.processor = start(s.t, "fakeprocessor", all)
	waitHealthy(s.t, s.processorURL+"/healthz", s.processor)
}

// startWorker starts (or restarts) the worker.
func (s *stack) startWorker(env ...string) {
	s.worker = s.anotherWorker(env...)
}

// anotherWorker starts a worker of the stack's, another replica when the
// stack's runs.
func (s *stack) anotherWorker(env ...string) *process {
	return start(s.t, "worker", append(append(append(s.serviceEnv(), "PROCESSOR_URL="+s.processorURL), webhooksEnv...), append(fastWorker, env...)...))
}

// payAsync makes crashBody's payment under key, answered at once (202), and
// returns it.
func (s *stack) payAsync(t *testing.T, key string) (p struct{ ID string }) {
	t.Helper()
	status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", key, crashBody, "Prefer", "respond-async")
	if status != http.StatusAccepted {
		t.Fatalf("payment: %d %s", status, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// startAPI starts (or restarts) the API and waits until it is ready.
func (s *stack) startAPI(env ...string) {
	s.api = s.startAPIAt(s.apiAddr, env...)
}

// startAPIAt starts an API on addr, another replica of the stack's when addr
// is not its own, and waits until it is ready.
func (s *stack) startAPIAt(addr string, env ...string) *process {
	s.t.Helper()
	p := start(s.t, "api", append(append(append(s.serviceEnv(), "API_ADDR="+addr, internalAddr), webhooksEnv...), env...))
	waitHealthy(s.t, "http://"+addr+"/readyz", p)
	return p
}

// killed waits until p has died of SIGKILL, as a crash point does.
func (p *process) killed(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s ended with %v, not SIGKILL\n%s", p.name, err, p.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not reach its crash point\n%s", p.name, p.out.String())
	}
}

// do sends a request to url and returns status, headers and body. A
// request whose connection dies unanswered gives status 0.
func do(t *testing.T, method, url, apiKey, idemKey, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	return res.StatusCode, res.Header, b
}

// processorList asks the processor, over its own API, for a list (a
// payment's charges, a refund key's refunds) and returns the ids in it.
func processorList(t *testing.T, s *stack, path string) []string {
	t.Helper()
	status, _, body := do(t, http.MethodGet, s.processorURL+path, "", "", "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || status != http.StatusOK {
		t.Fatalf("processor %s: %d %s", path, status, body)
	}
	ids := make([]string, len(list.Data))
	for i, o := range list.Data {
		ids[i] = o.ID
	}
	return ids
}

// chargesFor is the processor's charges of a payment.
func chargesFor(t *testing.T, s *stack, paymentID string) []string {
	t.Helper()
	return processorList(t, s, "/v1/charges?payment_id="+paymentID)
}
