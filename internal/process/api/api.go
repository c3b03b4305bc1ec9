// Package api builds and runs the API process: the HTTP API, the listener
// that wakes requests waiting for their keys, and its database pool. It also
// holds the api binary's two commands, migrate and seed.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/database"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/webhooks"
)

// Config is the configuration of the API.
type Config struct {
	process.Common
	process.KeyRetention
	process.CrashPoint
	process.Webhooks
	// DBReadConns sizes the pool of the key's reads; see docs/SCALING.md.
	DBReadConns    int32           `envconfig:"DB_READ_CONNS" default:"4" desc:"the most connections in the API's second pool, for the reads of a key outside a transaction (every idempotent POST's first statement, a waiting request's): about the database's cores"`
	Addr           string          `envconfig:"API_ADDR" default:":8080" desc:"address to listen on"`
	InternalAddr   string          `envconfig:"API_INTERNAL_ADDR" default:"127.0.0.1:9090" desc:"address of /metrics and /healthz for operators: internal, never the public port; loopback only by default"`
	DefaultWait    time.Duration   `envconfig:"IDEMPOTENCY_DEFAULT_WAIT" default:"5s" desc:"how long a POST waits for its operation without Prefer: wait"`
	MaxWait        time.Duration   `envconfig:"IDEMPOTENCY_MAX_WAIT" default:"30s" desc:"the longest Prefer: wait honoured"`
	LockTimeout    time.Duration   `envconfig:"IDEMPOTENCY_LOCK_TIMEOUT" default:"60s" desc:"age at which a held key lock is stale"`
	RetryAfter     time.Duration   `envconfig:"RETRY_AFTER" default:"1s" desc:"Retry-After on 202, 409 and 503"`
	RateLimit      int             `envconfig:"TENANT_RATE_LIMIT" default:"100" desc:"idempotent POSTs a tenant may send per window, across every API replica (0: no limit)"`
	RateWindow     time.Duration   `envconfig:"TENANT_RATE_WINDOW" default:"1s" desc:"the rate limit's window"`
	KeyCacheTTL    time.Duration   `envconfig:"API_KEY_CACHE_TTL" default:"10s" desc:"how long an API key that authenticated is trusted without a query (0: always query); a deleted key works that much longer"`
	TrustedProxies httpapi.Proxies `envconfig:"TRUSTED_PROXIES" desc:"addresses or CIDR prefixes of the proxies in front of the API, whose X-Forwarded-For is believed (unset: none is)"`
	AuthFailures   int             `envconfig:"AUTH_FAILURE_LIMIT" default:"20" desc:"failed authentications a client address may make per AUTH_FAILURE_WINDOW before it is refused 429 (0: no limit)"`
	AuthWindow     time.Duration   `envconfig:"AUTH_FAILURE_WINDOW" default:"1m" desc:"the window of AUTH_FAILURE_LIMIT"`
	MaxEndpoints   int             `envconfig:"WEBHOOK_MAX_ENDPOINTS" default:"16" desc:"webhook endpoints a tenant may register (a 400 endpoint_limit_reached past it)"`
	MaxSecrets     int             `envconfig:"WEBHOOK_MAX_SECRETS" default:"2" desc:"signing secrets of an endpoint live at once: the current one and those rotated out (a 409 rotation_in_progress past it)"`
	// Processor names the processor whose webhooks the API takes, and holds
	// its adapter's settings (their signing secrets among them).
	process.Processor
}

// Validate refuses settings that break the API's promises, naming the
// setting to change.
func (c Config) Validate() error {
	switch {
	case c.LockTimeout <= c.MaxWait:
		return fmt.Errorf("IDEMPOTENCY_LOCK_TIMEOUT (%s) must exceed IDEMPOTENCY_MAX_WAIT (%s): a waiting request holds the key's lock", c.LockTimeout, c.MaxWait)
	case c.DefaultWait > c.MaxWait:
		return fmt.Errorf("IDEMPOTENCY_DEFAULT_WAIT (%s) must not exceed IDEMPOTENCY_MAX_WAIT (%s)", c.DefaultWait, c.MaxWait)
	case c.AuthFailures < 0 || (c.AuthFailures > 0 && c.AuthWindow < time.Second):
		return fmt.Errorf("AUTH_FAILURE_LIMIT (%d) must be 0 (off) or positive, with AUTH_FAILURE_WINDOW (%s) at least 1s", c.AuthFailures, c.AuthWindow)
	case c.RateLimit < 0 || (c.RateLimit > 0 && c.RateWindow < time.Second):
		return fmt.Errorf("TENANT_RATE_LIMIT (%d) must be 0 (off) or positive, with TENANT_RATE_WINDOW (%s) at least 1s", c.RateLimit, c.RateWindow)
	case c.DBReadConns < 1:
		return fmt.Errorf("DB_READ_CONNS (%d) must be at least 1", c.DBReadConns)
	case c.MaxEndpoints < 1 || c.MaxSecrets < 2:
		return fmt.Errorf("WEBHOOK_MAX_ENDPOINTS (%d) must be at least 1 and WEBHOOK_MAX_SECRETS (%d) at least 2 (a rotation needs two)", c.MaxEndpoints, c.MaxSecrets)
	}
	if err := c.Webhooks.Validate(); err != nil {
		return err
	}
	if err := c.Processor.Validate(); err != nil {
		return err
	}
	return c.Common.Validate()
}

// API is the API process: the HTTP API, listening from the moment it is
// made, the listener that wakes requests waiting for their keys, the
// doorbell that wakes the workers' relays, and the database pools.
type API struct {
	// Keys is the API's key store, for tools and tests.
	Keys *idempotency.Store

	pool     *pgxpool.Pool
	reads    *pgxpool.Pool // the key's reads outside a transaction (Store.Reads)
	session  *pgxpool.Pool // past the pooler, when there is one; else pool
	listener *idempotency.Listener
	doorbell *outbox.Doorbell
	http     *process.HTTPServer
	internal *process.HTTPServer
	logger   *slog.Logger
}

// ringCooldown is the shortest time between two rings of the relays'
// doorbell: a job staged in a first phase reaches a relay up to this much
// later under load, and an API rings at most 500 times a second however
// many payments it starts.
const ringCooldown = 2 * time.Millisecond

// New builds the API from cfg and starts listening on cfg.Addr. It starts
// even while the database is down: it answers 503 and /readyz says not ready
// until the database is back. Run serves; an API that is not run must be
// closed.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*API, error) {
	if err := process.CheckConfig(logger, cfg); err != nil {
		return nil, err
	}
	if err := cfg.CrashPoint.Arm(cfg.AppEnv, logger, operation.CrashAfterFirstPhase); err != nil {
		return nil, err
	}
	a, err := openDB(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	server, err := a.newServer(cfg)
	if err != nil {
		a.closeDB()
		return nil, err
	}
	if err := a.listen(cfg, server); err != nil {
		a.closeDB()
		return nil, err
	}
	return a, nil
}

// openDB opens the API's pools and the listener that wakes requests waiting
// for their keys. None of them waits for the database.
func openDB(ctx context.Context, cfg Config, logger *slog.Logger) (*API, error) {
	// The session pool only lends its settings to the listener, which holds
	// a connection of its own.
	pool, session, err := cfg.OpenPools(ctx, 1)
	if err != nil {
		return nil, err
	}
	reads, err := cfg.OpenPool(ctx, cfg.DBReadConns)
	if err != nil {
		process.ClosePools(pool, session)
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		logger.Warn("database not reachable yet: failing closed until it is", "err", err)
	}
	return &API{pool: pool, reads: reads, session: session, listener: idempotency.NewListener(session, logger), logger: logger}, nil
}

// newServer builds the HTTP API on the API's pools: its key store, the
// operations of every kind, the webhook endpoints, the doorbell and the
// metrics' registry.
func (a *API) newServer(cfg Config) (*httpapi.Server, error) {
	inserter, err := jobs.NewInserter(a.pool, jobs.InsertCooldown, process.Quiet(a.logger))
	if err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Keys = &idempotency.Store{DB: a.pool, Reads: a.reads, LockTimeout: cfg.LockTimeout, Retention: cfg.KeyRetention.KeyRetention, Notifications: a.listener}
	// The API makes no processor call: its kinds have no processor.
	kinds := catalog.Kinds(nil)
	declared := cfg.Processor.Settings.Processor()
	if err := declared.Check(kinds); err != nil {
		return nil, err
	}
	processorWebhooks, err := cfg.Processor.Settings.Webhooks()
	if err != nil {
		return nil, err
	}
	renderer := render.New(kinds, []operation.Resource{webhooks.Resource}, webhooks.Rules)
	a.doorbell = outbox.NewDoorbell(a.pool, ringCooldown, a.logger)
	ops := &operation.Service{DB: a.pool, Keys: a.Keys, Jobs: jobs.Queue{Client: inserter}, Kinds: kinds, Render: renderer,
		Doorbell: a.doorbell, Processor: declared}
	server := &httpapi.Server{
		Tenants:           &tenants.Store{DB: a.pool, CacheTTL: cfg.KeyCacheTTL},
		Ops:               ops,
		Render:            renderer,
		Keys:              a.Keys,
		Logger:            a.logger,
		Ready:             a.pool.Ping,
		DefaultWait:       cfg.DefaultWait,
		MaxWait:           cfg.MaxWait,
		RetryAfter:        cfg.RetryAfter,
		Registry:          registry,
		ProcessorWebhooks: httpapi.ProcessorWebhooks{Webhooks: processorWebhooks},
		TrustedProxies:    cfg.TrustedProxies,
		AuthThrottle:      httpapi.AuthThrottle{Failures: cfg.AuthFailures, Window: cfg.AuthWindow},
		Tracer:            cfg.Provider(),
		Endpoints: &webhooks.Service{Ops: ops, Jobs: jobs.Queue{Client: inserter},
			Policy: safehttp.Policy{AllowPrivate: cfg.AllowPrivate}, Cipher: cfg.SecretsKey, EventTypes: kinds.EventTypes(),
			MaxEndpoints: cfg.MaxEndpoints, MaxSecrets: cfg.MaxSecrets},
	}
	if cfg.RateLimit > 0 {
		server.RateLimit = &tenants.Limiter{DB: a.pool, Requests: cfg.RateLimit, Window: cfg.RateWindow}
	}
	return server, nil
}

// listen starts listening for server: the API on cfg.Addr, /metrics and
// /healthz on cfg.InternalAddr.
func (a *API) listen(cfg Config, server *httpapi.Server) error {
	var err error
	a.http, err = process.Listen(cfg.Addr, server.Handler(), a.logger, cfg.MaxWait+15*time.Second, cfg.ShutdownTimeout)
	if err != nil {
		return err
	}
	a.internal, err = process.Listen(cfg.InternalAddr, server.Internal(), a.logger, 10*time.Second, 5*time.Second)
	if err != nil {
		a.http.Close()
		return err
	}
	return nil
}

// Addr is where the API listens.
func (a *API) Addr() string { return a.http.Addr() }

// InternalAddr is where the API serves /metrics.
func (a *API) InternalAddr() string { return a.internal.Addr() }

// Run serves until ctx ends, then lets in-flight requests finish within the
// shutdown timeout, and closes the API.
func (a *API) Run(ctx context.Context) error {
	defer a.closeDB()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before Wait: stops the listener when the server fails too
	wg.Go(func() { a.listener.Run(ctx) })
	wg.Go(func() { a.doorbell.Run(ctx) })
	// The internal listener serves until the API has shut down, so that
	// its last requests are still counted and scraped.
	internalCtx, stopInternal := context.WithCancel(context.WithoutCancel(ctx))
	wg.Go(func() {
		if err := a.internal.Run(internalCtx); err != nil {
			a.logger.Error("internal listener", "err", err)
		}
	})
	defer stopInternal()
	return a.http.Run(ctx)
}

// Close releases an API that was never run.
func (a *API) Close() {
	a.http.Close()
	a.internal.Close()
	a.closeDB()
}

func (a *API) closeDB() {
	a.reads.Close()
	process.ClosePools(a.pool, a.session)
}

// Migrate creates the database if it is missing and applies every
// migration, the service's and River's: past the pooler, when there is one
// (databaseURL is then DATABASE_SESSION_URL), since goose holds a lock of
// the session while it migrates.
func Migrate(ctx context.Context, databaseURL string, logger *slog.Logger) error {
	if err := database.EnsureDatabase(ctx, databaseURL); err != nil {
		return err
	}
	pool, err := database.Connect(ctx, databaseURL, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	return database.Migrate(ctx, pool, logger)
}

// Seed creates the demo tenants, whose API keys are public; only in
// development. With a webhook URL and secret, it also gives the Acme tenant
// a webhook endpoint there (make run's demo receiver), signing with that
// secret.
func Seed(ctx context.Context, cfg Config, webhookURL, webhookSecret string) error {
	if cfg.AppEnv != "development" {
		return errors.New("seed creates demo tenants with public API keys: it runs only with APP_ENV=development")
	}
	pool, err := cfg.Connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := (&tenants.Store{DB: pool}).SeedDemos(ctx); err != nil || webhookURL == "" {
		return err
	}
	return webhooks.SeedDemo(ctx, pool, cfg.SecretsKey, tenants.Demos[0].ID, webhookURL, webhookSecret)
}
