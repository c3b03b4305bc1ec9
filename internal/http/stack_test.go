package http_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/gateway"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/processor"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	acme   = "sk_test_acme"
	globex = "sk_test_globex"
)

// clock is a test clock that moves only when told to.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// stack is the whole service in one test: its own database, the fake
// processor and the API on real HTTP servers, and a River worker started on demand.
type stack struct {
	t         *testing.T
	db        *testdb.DB
	clock     *clock
	api       *httptest.Server
	client    *http.Client
	gateway   *gateway.Client
	keys      *idempotency.Store
	charger   *payments.Charger
	startOnce sync.Once
}

const lockTimeout = time.Minute

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := (&tenants.Store{DB: db.Pool}).SeedDemos(ctx); err != nil {
		t.Fatal(err)
	}

	proc, err := processor.New(db.Pool, logger, processor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	procServer := httptest.NewServer(proc)
	t.Cleanup(procServer.Close)
	t.Cleanup(proc.Close)

	inserter, err := outbox.NewInserter(db.Pool, logger)
	if err != nil {
		t.Fatal(err)
	}
	listener := idempotency.NewListener(db.Pool, logger)
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { listener.Run(listenCtx) })
	t.Cleanup(wg.Wait)
	t.Cleanup(stopListening)

	c := &clock{}
	keys := &idempotency.Store{DB: db.Pool, Now: c.Now, LockTimeout: lockTimeout, Retention: 24 * time.Hour,
		Notifications: listener, PollInterval: 200 * time.Millisecond}
	api := &httpapi.Server{
		Tenants:     &tenants.Store{DB: db.Pool},
		Payments:    &payments.Service{DB: db.Pool, Keys: keys, Jobs: outbox.Queue{Client: inserter}, Now: c.Now},
		Keys:        keys,
		Logger:      logger,
		Ready:       db.Pool.Ping,
		DefaultWait: 10 * time.Second,
		MaxWait:     20 * time.Second,
		RetryAfter:  time.Second,
	}
	apiServer := httptest.NewServer(api.Handler())
	t.Cleanup(apiServer.Close)
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	gw := gateway.New(procServer.URL, 5*time.Second)
	return &stack{
		t: t, db: db, clock: c, api: apiServer, client: client, gateway: gw, keys: keys,
		charger: &payments.Charger{DB: db.Pool, Keys: keys, Processor: gw, Render: httpapi.PaymentResponse, Now: c.Now},
	}
}

// startWorker starts a River worker that runs charge jobs until the test ends.
func (s *stack) startWorker() {
	s.startOnce.Do(func() {
		logger := slog.New(slog.NewTextHandler(s.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		worker, err := outbox.NewWorker(s.db.Pool, logger, outbox.WorkerConfig{
			MaxWorkers: 10, JobTimeout: 30 * time.Second, FetchPollInterval: 100 * time.Millisecond,
		}, s.charger)
		if err != nil {
			s.t.Fatal(err)
		}
		if err := worker.Start(context.Background()); err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := worker.Stop(ctx); err != nil {
				s.t.Errorf("stop worker: %v", err)
			}
		})
	})
}

// response is what the API answered.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// request sends one request to the API. headers are name, value pairs.
func (s *stack) request(method, path, apiKey, body string, headers ...string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.api.URL+path, bytes.NewBufferString(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// pay posts a payment under key.
func (s *stack) pay(apiKey, key, body string, headers ...string) response {
	s.t.Helper()
	return s.request(http.MethodPost, "/v1/payments", apiKey, body, append([]string{"Idempotency-Key", key}, headers...)...)
}

// count runs a counting query.
func (s *stack) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// chargesAtProcessor counts the processor's charges for a payment, asked over HTTP.
func (s *stack) chargesAtProcessor(paymentID string) int {
	s.t.Helper()
	list, err := s.gateway.ChargesByPayment(context.Background(), paymentID)
	if err != nil {
		s.t.Fatal(err)
	}
	byKey, err := s.gateway.ChargesByIdempotencyKey(context.Background(), payments.DownstreamKey(paymentID))
	if err != nil {
		s.t.Fatal(err)
	}
	if len(list) != len(byKey) {
		s.t.Fatalf("payment %s: %d charges by payment, %d by downstream key", paymentID, len(list), len(byKey))
	}
	return len(list)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recoveryPoint reads a key's recovery point from the database.
func (s *stack) recoveryPoint(tenantID, key string) string {
	s.t.Helper()
	var point string
	err := s.db.Pool.QueryRow(context.Background(),
		`SELECT recovery_point FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, tenantID, key).Scan(&point)
	if err == pgx.ErrNoRows {
		return ""
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return point
}
