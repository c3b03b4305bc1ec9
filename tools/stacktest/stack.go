// Package stacktest runs the whole service inside one test process: its own
// database, and the fake processor, the API and the worker, each built by its
// process constructor and serving real HTTP on a loopback port (the worker
// starts on demand). Tests of several packages share it.
package stacktest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/gateway/stripe"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/fakeprocessor/processor"
	"github.com/example/payments/tools/stripemock"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// SecretsKey encrypts the webhook endpoints' secrets in tests
// (WEBHOOK_SECRETS_KEY).
const SecretsKey = "dGVzdC1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI="

// The demo tenants' API keys and ids.
const (
	Acme        = "sk_test_acme"
	Globex      = "sk_test_globex"
	AcmeID      = "ten_acme"
	GlobexID    = "ten_globex"
	LockTimeout = time.Minute
)

// RateLimit is a tenant's limit on idempotent POSTs: Requests per Window.
type RateLimit struct {
	Requests int
	Window   time.Duration
}

// Options tune a stack; the zero value is a healthy service.
type Options struct {
	// Chaos is passed to the processor.
	Chaos fakeprocessor.Chaos
	// MaxAttempts is the jobs' retry budget (default 3).
	MaxAttempts int
	// Deadline bounds how long an operation may be attempted (default 1h).
	Deadline time.Duration
	// JobTimeout bounds one run of a job (default 30s).
	JobTimeout time.Duration
	// ProcessorTimeout is the gateway's timeout (default 5s).
	ProcessorTimeout time.Duration
	// DBProxy puts a Proxy between the API and Postgres (Stack.Proxy).
	DBProxy bool
	// RateLimit limits each tenant's idempotent POSTs; off by default.
	RateLimit RateLimit
	// ReconcileInterval schedules the worker's periodic reconciliation, with
	// runs bounded by ReconcileTimeout; by default tests run it themselves.
	ReconcileInterval, ReconcileTimeout time.Duration
	// ReapInterval schedules the worker's key reaper; off by default.
	ReapInterval time.Duration
	// Stripe, when set, points the worker at Stripe's API instead of the fake
	// processor, and has the API verify Stripe's webhooks.
	Stripe *Stripe
	// Processor, when set, are the settings of the processor the API and
	// the worker run against instead of the fake processor (a test-only
	// processor's, say); the fake processor runs all the same.
	Processor gateway.Settings
	// ProcessorWebhooks makes the processor send its webhooks to the API
	// (Chaos's webhook settings apply); off by default.
	ProcessorWebhooks bool
	// WebhookSchedule is the wait before each retry of a merchant webhook
	// (default 100ms, 200ms, 400ms).
	WebhookSchedule webhooks.Schedule
	// WebhookConcurrency, TenantInFlight and EndpointInFlight, when set,
	// are WEBHOOK_CONCURRENCY, WEBHOOK_TENANT_IN_FLIGHT and
	// WEBHOOK_ENDPOINT_IN_FLIGHT.
	WebhookConcurrency, TenantInFlight, EndpointInFlight int
	// AuthThrottle limits failed authentications per client address; off by
	// default, since every test client shares the loopback address.
	AuthThrottle httpapi.AuthThrottle
	// TrustedProxies are the peers whose X-Forwarded-For the API believes.
	TrustedProxies httpapi.Proxies
	// PublicEndpointsOnly refuses webhook endpoints on loopback and private
	// networks, as in production; tests allow them by default, their
	// receivers being on loopback.
	PublicEndpointsOnly bool
	// Spans, when set, gets every span of the three processes: each has a
	// TracerProvider of its own (service.name api, worker or processor)
	// feeding it, such as a tracetest.SpanRecorder. Unset, the processes
	// trace with the global provider, a no-op in tests.
	Spans sdktrace.SpanProcessor
	// Logs, when set, gets the processes' logs as JSON lines at info level,
	// each with its process and, about a request or a job, its trace_id;
	// unset, warnings and errors go to the test's output.
	Logs io.Writer
}

// Stripe is the Stripe a stack runs against (PROCESSOR=stripe).
type Stripe struct {
	// APIBase is STRIPE_API_BASE: a stripe-mock (package stripemock), or a
	// Stripe simulator (package stripesim).
	APIBase string
	// WebhookSecret is STRIPE_WEBHOOK_SECRET: whsec_ strings,
	// comma-separated.
	WebhookSecret string
}

// Endpoint is where a process of the stack answers.
type Endpoint struct{ URL string }

// Stack is the service under test: the processor, the API and the worker,
// each built by its process constructor (package process/api, /worker, /processor) as the binaries
// build them, on free loopback ports.
//
// The service decides time with the database's clock, so a test makes time
// pass for a row by moving its timestamps back (Exec), never by sleeping.
type Stack struct {
	T   testing.TB
	DB  *testdb.DB
	API Endpoint
	// Processor is the processor as the worker reaches it, through a proxy
	// that ProcessorDown cuts.
	Processor Endpoint
	Gateway   *fake.Client
	// The worker's parts, for tests that drive them directly.
	Keys       *idempotency.Store
	Ops        *operation.Runner
	Reconciler *operation.Reconciler
	Sweeper    *operation.Sweeper
	Relay      *outbox.Relay
	Deliverer  *webhooks.Deliverer
	// Proxy stands between the API and Postgres when Options.DBProxy is set.
	Proxy *Proxy
	// WebhookSecret is the processor's webhook secret the API verifies with.
	WebhookSecret string

	client       *http.Client
	apiInternal  string
	procInternal string
	procProxy    *Proxy
	worker       *worker.Worker
	run          func(name string, p interface{ Run(context.Context) error })
	startOnce    sync.Once
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
	if opts.WebhookSchedule == nil {
		opts.WebhookSchedule = webhooks.Schedule{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	}
	ctx, cancel := context.WithCancel(context.Background())
	db := testdb.New(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.Logs != nil {
		logger = process.NewLogger(opts.Logs, "json", slog.LevelInfo)
	}
	if err := (&tenants.Store{DB: db.Pool}).SeedDemos(ctx); err != nil {
		t.Fatal(err)
	}
	s := &Stack{T: t, DB: db, client: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(s.client.CloseIdleConnections)
	// Each process runs until the test ends; its cleanup waits for it.
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	s.run = func(name string, p interface{ Run(context.Context) error }) {
		wg.Go(func() {
			if err := p.Run(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	webhookSecret := s.startAPI(ctx, opts, logger)
	s.startProcessor(ctx, opts, logger, webhookSecret)
	s.buildWorker(ctx, opts, logger)
	s.Gateway = fake.New(s.Processor.URL, opts.ProcessorTimeout)
	return s
}

// startAPI starts the API, and returns the secret it verifies the
// processor's webhooks with.
func (s *Stack) startAPI(ctx context.Context, opts Options, logger *slog.Logger) signing.Secrets {
	t := s.T
	t.Helper()
	var acfg api.Config
	defaults(t, &acfg)
	acfg.DatabaseURL, acfg.Addr, acfg.InternalAddr = s.DB.URL, "127.0.0.1:0", "127.0.0.1:0"
	webhooksFor(t, &acfg.Webhooks, !opts.PublicEndpointsOnly)
	acfg.LockTimeout, acfg.DefaultWait, acfg.MaxWait, acfg.RetryAfter = LockTimeout, 10*time.Second, 20*time.Second, time.Second
	acfg.RateLimit, acfg.RateWindow = opts.RateLimit.Requests, max(opts.RateLimit.Window, time.Second)
	acfg.AuthFailures, acfg.AuthWindow = opts.AuthThrottle.Failures, max(opts.AuthThrottle.Window, time.Second)
	acfg.TrustedProxies = opts.TrustedProxies
	acfg.TracerProvider = tracerProvider(opts.Spans, "api")
	if opts.DBProxy {
		// The API may reach Postgres through a proxy; the worker never does.
		u, err := url.Parse(s.DB.URL)
		if err != nil {
			t.Fatal(err)
		}
		s.Proxy = NewProxy(t, u.Host)
		u.Host = s.Proxy.Addr()
		acfg.DatabaseURL = u.String()
	}
	// The API's secret verifies the processor's webhooks, sent only when
	// the processor is given the secret too.
	s.WebhookSecret = signing.NewSecret()
	secrets, err := signing.ParseSecrets(s.WebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Processor != nil {
		acfg.Processor = process.Processor{Name: opts.Processor.Processor().Name, Settings: opts.Processor}
	} else if opts.Stripe != nil {
		st := processorDefaults(t, &acfg.Processor, stripe.Adapter).(*stripe.Settings)
		if err := st.WebhookSecret.Decode(opts.Stripe.WebhookSecret); err != nil {
			t.Fatal(err)
		}
	} else {
		processorDefaults(t, &acfg.Processor, fake.Adapter).(*fake.Settings).WebhookSecret = secrets
	}
	a, err := api.New(ctx, acfg, logger.With("process", "api"))
	if err != nil {
		t.Fatal(err)
	}
	s.run("api", a)
	s.API = Endpoint{URL: "http://" + a.Addr()}
	s.apiInternal = "http://" + a.InternalAddr()
	return secrets
}

// startProcessor starts the processor, behind the proxy that ProcessorDown
// cuts; with opts.ProcessorWebhooks it sends its webhooks to the API,
// signed with webhookSecret.
func (s *Stack) startProcessor(ctx context.Context, opts Options, logger *slog.Logger, webhookSecret signing.Secrets) {
	t := s.T
	t.Helper()
	var pcfg processor.Config
	defaults(t, &pcfg)
	pcfg.DatabaseURL, pcfg.Addr, pcfg.InternalAddr, pcfg.TimeoutHang = s.DB.URL, "127.0.0.1:0", "127.0.0.1:0", 10*time.Second
	pcfg.TracerProvider = tracerProvider(opts.Spans, "fakeprocessor")
	pcfg.FailRate, pcfg.DropRate, pcfg.Latency, pcfg.ExecLatency = opts.Chaos.FailRate, opts.Chaos.DropRate, opts.Chaos.Latency, opts.Chaos.ExecLatency
	pcfg.RateLimit = opts.Chaos.RateLimit
	if opts.ProcessorWebhooks {
		pcfg.WebhookURL, pcfg.WebhookSecret, pcfg.WebhookPollInterval = s.API.URL+"/v1/processor/webhooks", webhookSecret, 50*time.Millisecond
		pcfg.WebhookDropRate, pcfg.WebhookDuplicateRate, pcfg.WebhookDelay = opts.Chaos.WebhookDropRate, opts.Chaos.WebhookDuplicateRate, opts.Chaos.WebhookDelay
	}
	proc, err := processor.New(ctx, pcfg, logger.With("process", "fakeprocessor"))
	if err != nil {
		t.Fatal(err)
	}
	s.run("fakeprocessor", proc)
	s.procInternal = "http://" + proc.InternalAddr()
	s.procProxy = NewProxy(t, proc.Addr())
	s.Processor = Endpoint{URL: "http://" + s.procProxy.Addr()}
}

// buildWorker builds the worker, which StartWorker starts: retries are
// fast, and the periodic jobs are left to the tests to run.
func (s *Stack) buildWorker(ctx context.Context, opts Options, logger *slog.Logger) {
	t := s.T
	t.Helper()
	var wcfg worker.Config
	defaults(t, &wcfg)
	wcfg.DatabaseURL, wcfg.MetricsAddr = s.DB.URL, "127.0.0.1:0"
	webhooksFor(t, &wcfg.Webhooks, !opts.PublicEndpointsOnly)
	wcfg.WebhookSchedule = opts.WebhookSchedule
	wcfg.WebhookConcurrency = cmp.Or(opts.WebhookConcurrency, wcfg.WebhookConcurrency)
	wcfg.TenantInFlight = cmp.Or(opts.TenantInFlight, wcfg.TenantInFlight)
	wcfg.EndpointInFlight = cmp.Or(opts.EndpointInFlight, wcfg.EndpointInFlight)
	wcfg.ProcessorTimeout, wcfg.MaxAttempts, wcfg.Deadline = opts.ProcessorTimeout, opts.MaxAttempts, opts.Deadline
	wcfg.JobTimeout, wcfg.FetchPollInterval, wcfg.RetryBaseDelay, wcfg.RetryMaxDelay = cmp.Or(opts.JobTimeout, 30*time.Second), 100*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond
	wcfg.ReconcileInterval, wcfg.ReapInterval, wcfg.ReconcileWindow, wcfg.StuckAfter = opts.ReconcileInterval, opts.ReapInterval, time.Hour, time.Minute
	if opts.ReconcileTimeout > 0 {
		wcfg.ReconcileTimeout = opts.ReconcileTimeout
	}
	wcfg.TombstoneRetention = 7 * 24 * time.Hour
	wcfg.TracerProvider = tracerProvider(opts.Spans, "worker")
	if opts.Processor != nil {
		wcfg.Processor = process.Processor{Name: opts.Processor.Processor().Name, Settings: opts.Processor}
	} else if opts.Stripe != nil {
		st := processorDefaults(t, &wcfg.Processor, stripe.Adapter).(*stripe.Settings)
		st.APIBase, st.APIKey = opts.Stripe.APIBase, stripemock.APIKey
	} else {
		processorDefaults(t, &wcfg.Processor, fake.Adapter).(*fake.Settings).URL = s.Processor.URL
	}
	var err error
	s.worker, err = worker.New(ctx, wcfg, logger.With("process", "worker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.startOnce.Do(s.worker.Close) // a worker never started is closed
	})
	s.Keys, s.Ops, s.Reconciler, s.Sweeper, s.Relay = s.worker.Keys, s.worker.Ops, s.worker.Reconciler, s.worker.Sweeper, s.worker.Relay
	s.Deliverer = s.worker.Deliverer
	s.Keys.LockTimeout = LockTimeout
}

// tracerProvider is a TracerProvider for the process service, feeding
// spans; nil when spans is. The test owns spans, and shuts it down if it
// must (a recorder need not be).
func tracerProvider(spans sdktrace.SpanProcessor, service string) trace.TracerProvider {
	if spans == nil {
		return nil
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
}

// webhooksFor sets the test key and, with allowPrivate, lets endpoints be
// on loopback, where a test's receivers are.
func webhooksFor(t testing.TB, w *process.Webhooks, allowPrivate bool) {
	t.Helper()
	if err := w.SecretsKey.Decode(SecretsKey); err != nil {
		t.Fatal(err)
	}
	w.AllowPrivate = allowPrivate
}

// defaults fills cfg with every default, as a binary with an empty
// environment would read it.
func defaults(t testing.TB, cfg any) {
	t.Helper()
	if err := process.Load(cfg); err != nil {
		t.Fatal(err)
	}
}

// processorDefaults sets p to the processor a declares, its settings the
// defaults, and returns them for the caller to change.
func processorDefaults(t testing.TB, p *process.Processor, a gateway.Adapter) gateway.Settings {
	t.Helper()
	var err error
	if *p, err = process.NewProcessor(a); err != nil {
		t.Fatal(err)
	}
	return p.Settings
}

// Relayed moves every job first phases staged to River's queue, as the
// worker's relay does once it runs: for a test that looks at the jobs before
// it starts the worker.
func (s *Stack) Relayed() {
	s.T.Helper()
	if _, err := s.Relay.Drain(context.Background()); err != nil {
		s.T.Fatal(err)
	}
}

// StartWorker starts the worker, which runs jobs until the test ends.
func (s *Stack) StartWorker() {
	s.startOnce.Do(func() { s.run("worker", s.worker) })
}

// ProcessorDown cuts the worker off the processor: open connections drop
// and new ones are refused, so a call's outcome is unknown. With false, the
// processor is back.
func (s *Stack) ProcessorDown(down bool) {
	if down {
		s.procProxy.Cut()
	} else {
		s.procProxy.Restore()
	}
}

// Response is what the API answered.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Request sends one request to the API. headers are name, value pairs.
func (s *Stack) Request(method, path, apiKey, body string, headers ...string) Response {
	s.T.Helper()
	var set []string
	if apiKey != "" {
		set = append(set, "Authorization", "Bearer "+apiKey)
	}
	if body != "" {
		set = append(set, "Content-Type", "application/json")
	}
	return s.send(method, s.API.URL+path, bytes.NewBufferString(body), append(set, headers...)...)
}

// send sends one request, which must get an answer; headers are name, value
// pairs, set in order.
func (s *Stack) send(method, url string, body io.Reader, headers ...string) Response {
	s.T.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		s.T.Fatal(err)
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
	s.DB.Exec(s.T, sql, args...)
}

// Count runs a counting query.
func (s *Stack) Count(sql string, args ...any) int {
	s.T.Helper()
	return s.DB.Count(s.T, sql, args...)
}

// ChargesAtProcessor counts the processor's charges for a payment, asked
// over HTTP both by payment and by downstream key.
func (s *Stack) ChargesAtProcessor(paymentID string) int {
	s.T.Helper()
	list, err := s.Gateway.ChargesByPayment(context.Background(), paymentID)
	if err != nil {
		s.T.Fatal(err)
	}
	byKey, err := s.Gateway.ChargesByIdempotencyKey(context.Background(), payments.Names.DownstreamKey(paymentID))
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

// LogLines counts the lines of logs that contain every one of parts: a
// process writes some of its lines after it has answered (a job's attempt,
// once the attempt returns), so a test waits for them with WaitFor.
func LogLines(logs string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// APIMetrics is what the API serves on /metrics, on its internal listener.
func (s *Stack) APIMetrics() string {
	s.T.Helper()
	return s.get(s.apiInternal + "/metrics")
}

// WorkerMetrics is what the worker serves on /metrics.
func (s *Stack) WorkerMetrics() string {
	s.T.Helper()
	return s.get("http://" + s.worker.MetricsAddr() + "/metrics")
}

// ProcessorMetrics is what the processor serves on /metrics, on its
// internal listener.
func (s *Stack) ProcessorMetrics() string {
	s.T.Helper()
	return s.get(s.procInternal + "/metrics")
}

// OpenMetricsAccept is the Accept header of a scraper that asks for
// OpenMetrics, which alone carries exemplars.
const OpenMetricsAccept = "application/openmetrics-text; version=1.0.0"

// APIOpenMetrics is APIMetrics in OpenMetrics, with the exemplars.
func (s *Stack) APIOpenMetrics() string {
	s.T.Helper()
	return s.get(s.apiInternal+"/metrics", "Accept", OpenMetricsAccept)
}

// WorkerOpenMetrics is WorkerMetrics in OpenMetrics, with the exemplars.
func (s *Stack) WorkerOpenMetrics() string {
	s.T.Helper()
	return s.get("http://"+s.worker.MetricsAddr()+"/metrics", "Accept", OpenMetricsAccept)
}

// get is the body of a GET of url, which must answer; headers are name,
// value pairs.
func (s *Stack) get(url string, headers ...string) string {
	s.T.Helper()
	return string(s.send(http.MethodGet, url, nil, headers...).Body)
}
