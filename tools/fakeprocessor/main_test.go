package fakeprocessor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// visaBody is the body of a charge that succeeds.
const visaBody = `{"amount":900,"currency":"USD","payment_method":"pm_card_visa"}`

// env is one test's processor: its own database and HTTP server.
type env struct {
	t      *testing.T
	db     *testdb.DB
	proc   *fakeprocessor.Server
	server *httptest.Server
}

// newEnv starts a processor with cfg on a fresh database, sending its
// webhooks as the processor process does.
func newEnv(t *testing.T, cfg fakeprocessor.Config) *env {
	t.Helper()
	e := newEnvOn(t, testdb.New(t), cfg)
	e.sendWebhooks()
	return e
}

// newEnvOn starts a processor with cfg on db, which another may share. It
// does not send webhooks until sendWebhooks is called.
func newEnvOn(t *testing.T, db *testdb.DB, cfg fakeprocessor.Config) *env {
	t.Helper()
	return newEnvPool(t, db, db.Pool, cfg)
}

// newEnvPool is newEnvOn with the processor on pool, a pool of db's own.
func newEnvPool(t *testing.T, db *testdb.DB, pool *pgxpool.Pool, cfg fakeprocessor.Config) *env {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	proc, err := fakeprocessor.New(pool, logger, cfg)
	if err != nil {
		t.Fatalf("new processor: %v", err)
	}
	server := httptest.NewServer(proc)
	t.Cleanup(server.Close)
	return &env{t: t, db: db, proc: proc, server: server}
}

// sendWebhooks runs the processor's webhook sender until the returned
// function, or the end of the test, stops it and waits for it to return.
func (e *env) sendWebhooks() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.proc.SendWebhooks(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends a POST with an Idempotency-Key (none when key is empty).
func (e *env) post(path, key, body string) response {
	e.t.Helper()
	resp, err := e.postCtx(context.Background(), path, key, body)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// postOK sends a POST with an Idempotency-Key and fails t unless the
// answer is a 200.
func (e *env) postOK(t *testing.T, path, key, body string) response {
	t.Helper()
	resp := e.post(path, key, body)
	if resp.status != http.StatusOK {
		t.Fatalf("POST %s under %q: %d %s, want 200", path, key, resp.status, resp.body)
	}
	return resp
}

// postCtx is post that returns the transport error instead of failing.
func (e *env) postCtx(ctx context.Context, path, key, body string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.server.URL+path, bytes.NewBufferString(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return e.do(req)
}

// get sends a GET.
func (e *env) get(path string) response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.server.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

func (e *env) do(req *http.Request) (response, error) {
	resp, err := e.server.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// count runs a count(*) query against the test database.
func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("count: %v", err)
	}
	return n
}

// chargesUnder counts the ledger's charges under an idempotency key.
func (e *env) chargesUnder(key string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM processor.charges WHERE idempotency_key = $1`, key)
}

// keyRows counts the processor's idempotency key rows for key.
func (e *env) keyRows(key string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM processor.idempotency_keys WHERE key = $1`, key)
}

// errorJSON is the error member of an error answer.
type errorJSON struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Charge  string `json:"charge"`
}

// decode unmarshals an answer's body into v.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r.body, err)
	}
	return v
}

// decodeError reads an error answer.
func decodeError(t *testing.T, r response) errorJSON {
	t.Helper()
	return decode[struct {
		Error errorJSON `json:"error"`
	}](t, r).Error
}

// wantError fails t unless resp is an error answer with status, its error
// of type typ with code.
func wantError(t *testing.T, resp response, status int, typ, code string) {
	t.Helper()
	if resp.status != status {
		t.Fatalf("status = %d, want %d: %s", resp.status, status, resp.body)
	}
	if ej := decodeError(t, resp); ej.Type != typ || ej.Code != code {
		t.Errorf("error = %+v, want %s %s", ej, typ, code)
	}
}

// wantReplayed fails t unless resp is a 200 replayed from an earlier
// request with the same key.
func wantReplayed(t *testing.T, resp response) {
	t.Helper()
	if resp.status != http.StatusOK || resp.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s", resp.status, resp.body)
	}
}

// wantFresh fails t unless resp is a 200 answered afresh, not replayed.
func wantFresh(t *testing.T, resp response) {
	t.Helper()
	if resp.status != http.StatusOK || resp.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("fresh answer: %d (Idempotent-Replayed %q) %s", resp.status, resp.header.Get("Idempotent-Replayed"), resp.body)
	}
}

// wantReplayOf fails t unless again replays first: the same status and
// body, marked Idempotent-Replayed.
func wantReplayOf(t *testing.T, again, first response) {
	t.Helper()
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d (Idempotent-Replayed %q) %s\nwant the first answer: %d %s",
			again.status, again.header.Get("Idempotent-Replayed"), again.body, first.status, first.body)
	}
}

// wantChargesUnder fails t unless the ledger holds n charges under key.
func (e *env) wantChargesUnder(t *testing.T, key string, n int) {
	t.Helper()
	if got := e.chargesUnder(key); got != n {
		t.Errorf("charges under %s = %d, want %d", key, got, n)
	}
}

// postAsync sends a POST in the background and returns the channel its
// answer comes on; a request that fails fails the test and sends a zero
// response.
func (e *env) postAsync(path, key, body string) <-chan response {
	answered := make(chan response, 1)
	go func() {
		resp, err := e.postCtx(context.Background(), path, key, body)
		if err != nil {
			e.t.Errorf("POST %s: %v", path, err)
		}
		answered <- resp
	}()
	return answered
}

// badConfig is a configuration that New must refuse.
type badConfig struct {
	name string
	cfg  fakeprocessor.Config
}

// wantRefused checks, in a subtest each, that New refuses every one of
// configs.
func wantRefused(t *testing.T, configs []badConfig) {
	t.Helper()
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := fakeprocessor.New(nil, nil, tt.cfg); err == nil {
				t.Error("New accepted the configuration")
			}
		})
	}
}

// postUnanswered sends a POST with ctx and fails unless no answer came:
// the caller gave up first, or the connection was dropped.
func (e *env) postUnanswered(ctx context.Context, path, key, body string) {
	e.t.Helper()
	if resp, err := e.postCtx(ctx, path, key, body); err == nil {
		e.t.Fatalf("POST %s: got an answer, want none: %d %s", path, resp.status, resp.body)
	}
}
