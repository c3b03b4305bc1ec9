// Package stacktest runs the whole service inside one test: its own
// database, the fake processor and the API on real HTTP servers, and a River
// worker started on demand. Tests of several packages share it.
package stacktest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/gateway"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/processor"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/testdb"
	"github.com/example/payments/internal/testwait"
)

// The demo tenants' API keys and ids.
const (
	Acme        = "sk_test_acme"
	Globex      = "sk_test_globex"
	AcmeID      = "ten_acme"
	LockTimeout = time.Minute
)

// Options tune a stack; the zero value is a healthy service.
type Options struct {
	// Chaos is passed to the processor.
	Chaos processor.Chaos
	// MaxAttempts is the jobs' retry budget (default 3).
	MaxAttempts int
	// Deadline bounds how long an operation may be attempted (default 1h).
	Deadline time.Duration
	// ProcessorTimeout is the gateway's timeout (default 5s).
	ProcessorTimeout time.Duration
	// DBProxy puts a Proxy between the API and Postgres (Stack.Proxy).
	DBProxy bool
	// RateLimit limits each tenant's idempotent POSTs; off by default.
	RateLimit httpapi.RateLimit
}

// Stack is the service under test.
//
// The service decides time with the database's clock, so a test makes time
// pass for a row by moving its timestamps back (Exec), never by sleeping.
type Stack struct {
	T          testing.TB
	DB         *testdb.DB
	API        *httptest.Server
	Processor  *httptest.Server
	Gateway    *gateway.Client
	Keys       *idempotency.Store
	Ops        *payments.Operations
	Reconciler *payments.Reconciler
	Sweeper    *payments.Sweeper
	// Proxy stands between the API and Postgres when Options.DBProxy is set.
	Proxy *Proxy

	opts      Options
	logger    *slog.Logger
	client    *http.Client
	down      atomic.Bool
	startOnce sync.Once
}

// New starts a stack for t; everything stops when t ends.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 3
	}
	if opts.Deadline == 0 {
		opts.Deadline = time.Hour
	}
	if opts.ProcessorTimeout == 0 {
		opts.ProcessorTimeout = 5 * time.Second
	}
	ctx := context.Background()
	db := testdb.New(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := (&tenants.Store{DB: db.Pool}).SeedDemos(ctx); err != nil {
		t.Fatal(err)
	}
	s := &Stack{T: t, DB: db, opts: opts, logger: logger, client: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(s.client.CloseIdleConnections)

	proc, err := processor.New(db.Pool, logger, processor.Config{Chaos: opts.Chaos, TimeoutHang: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Processor = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			panic(http.ErrAbortHandler) // an outage: the connection drops unanswered
		}
		proc.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Processor.Close)
	t.Cleanup(proc.Close)

	// The API may reach Postgres through a proxy; the worker side never does.
	apiPool := db.Pool
	if opts.DBProxy {
		u, err := url.Parse(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		s.Proxy = NewProxy(t, u.Host)
		u.Host = s.Proxy.Addr()
		if apiPool, err = database.Connect(ctx, u.String()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(apiPool.Close)
	}
	inserter, err := outbox.NewInserter(apiPool, logger)
	if err != nil {
		t.Fatal(err)
	}
	listener := idempotency.NewListener(apiPool, logger)
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { listener.Run(listenCtx) })
	t.Cleanup(wg.Wait)
	t.Cleanup(stopListening)

	apiKeys := &idempotency.Store{DB: apiPool, LockTimeout: LockTimeout, Retention: 24 * time.Hour,
		Notifications: listener, PollInterval: 200 * time.Millisecond}
	api := &httpapi.Server{
		Tenants:     &tenants.Store{DB: apiPool},
		Payments:    &payments.Service{DB: apiPool, Keys: apiKeys, Jobs: outbox.Queue{Client: inserter}, Render: httpapi.Renderer{}},
		Keys:        apiKeys,
		Logger:      logger,
		Ready:       apiPool.Ping,
		Registry:    prometheus.NewRegistry(),
		DefaultWait: 10 * time.Second,
		MaxWait:     20 * time.Second,
		RetryAfter:  time.Second,
		RateLimit:   opts.RateLimit,
	}
	s.API = httptest.NewServer(api.Handler())
	t.Cleanup(s.API.Close)

	s.Keys = &idempotency.Store{DB: db.Pool, LockTimeout: LockTimeout, Retention: 24 * time.Hour, TombstoneRetention: 7 * 24 * time.Hour}
	s.Gateway = gateway.New(s.Processor.URL, opts.ProcessorTimeout)
	s.Ops = &payments.Operations{DB: db.Pool, Keys: s.Keys, Processor: s.Gateway, Render: httpapi.Renderer{},
		MaxAttempts: opts.MaxAttempts, Deadline: opts.Deadline}
	s.Reconciler = &payments.Reconciler{Ops: s.Ops, Logger: logger, Window: time.Hour, Grace: time.Minute, BatchSize: 100}
	s.Sweeper = &payments.Sweeper{DB: db.Pool, Jobs: outbox.Queue{DB: db.Pool, RescueAfter: time.Minute},
		StuckAfter: time.Minute, BatchSize: 100}
	return s
}

// StartWorker starts a River worker that runs charge jobs until the test
// ends. Retries are fast; the periodic jobs are left to the tests to run.
func (s *Stack) StartWorker() {
	s.startOnce.Do(func() {
		worker, err := outbox.NewWorker(s.DB.Pool, s.logger, outbox.WorkerConfig{
			MaxWorkers:        10,
			JobTimeout:        30 * time.Second,
			RescueAfter:       outbox.RescueAfter(30 * time.Second),
			Backoff:           outbox.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
			FetchPollInterval: 100 * time.Millisecond,
		}, outbox.Deps{Ops: s.Ops, Reconciler: s.Reconciler, Sweeper: s.Sweeper, Logger: s.logger})
		if err != nil {
			s.T.Fatal(err)
		}
		if err := worker.Start(context.Background()); err != nil {
			s.T.Fatal(err)
		}
		s.T.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := worker.Stop(ctx); err != nil {
				s.T.Errorf("stop worker: %v", err)
			}
		})
	})
}

// ProcessorDown makes every processor call drop its connection unanswered,
// or, with false, brings the processor back.
func (s *Stack) ProcessorDown(down bool) { s.down.Store(down) }

// Response is what the API answered.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Request sends one request to the API. headers are name, value pairs.
func (s *Stack) Request(method, path, apiKey, body string, headers ...string) Response {
	s.T.Helper()
	req, err := http.NewRequest(method, s.API.URL+path, bytes.NewBufferString(body))
	if err != nil {
		s.T.Fatal(err)
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
		s.T.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.T.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Pay posts a payment under key.
func (s *Stack) Pay(apiKey, key, body string, headers ...string) Response {
	s.T.Helper()
	return s.Request(http.MethodPost, "/v1/payments", apiKey, body, append([]string{"Idempotency-Key", key}, headers...)...)
}

// Exec runs a statement, such as one that moves timestamps back to make
// time pass for a row.
func (s *Stack) Exec(sql string, args ...any) {
	s.T.Helper()
	if _, err := s.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		s.T.Fatal(err)
	}
}

// Count runs a counting query.
func (s *Stack) Count(sql string, args ...any) int {
	s.T.Helper()
	var n int
	if err := s.DB.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.T.Fatal(err)
	}
	return n
}

// ChargesAtProcessor counts the processor's charges for a payment, asked
// over HTTP both by payment and by downstream key.
func (s *Stack) ChargesAtProcessor(paymentID string) int {
	s.T.Helper()
	list, err := s.Gateway.ChargesByPayment(context.Background(), paymentID)
	if err != nil {
		s.T.Fatal(err)
	}
	byKey, err := s.Gateway.ChargesByIdempotencyKey(context.Background(), payments.DownstreamKey(paymentID))
	if err != nil {
		s.T.Fatal(err)
	}
	if len(list) != len(byKey) {
		s.T.Fatalf("payment %s: %d charges by payment, %d by downstream key", paymentID, len(list), len(byKey))
	}
	return len(list)
}

// KeyResource reads the id of the resource a key created; "" when none.
func (s *Stack) KeyResource(tenantID, key string) string {
	s.T.Helper()
	var id *string
	err := s.DB.Pool.QueryRow(context.Background(),
		`SELECT resource_id FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, tenantID, key).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.T.Fatal(err)
	}
	if id == nil {
		return ""
	}
	return *id
}

// RecoveryPoint reads a key's recovery point; "" when there is no such key.
func (s *Stack) RecoveryPoint(tenantID, key string) string {
	s.T.Helper()
	var point string
	err := s.DB.Pool.QueryRow(context.Background(),
		`SELECT recovery_point FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, tenantID, key).Scan(&point)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	if err != nil {
		s.T.Fatal(err)
	}
	return point
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}
