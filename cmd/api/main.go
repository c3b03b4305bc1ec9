// Command api serves the payments API. "api migrate" applies the migrations
// and "api seed" creates the development tenants.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/serve"
	"github.com/example/payments/internal/tenants"
)

// config is read from the environment; see the README for each variable.
type config struct {
	DatabaseURL     string        `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"`
	Addr            string        `envconfig:"API_ADDR" default:":8080"`
	AppEnv          string        `envconfig:"APP_ENV" default:"production"`
	DefaultWait     time.Duration `envconfig:"IDEMPOTENCY_DEFAULT_WAIT" default:"5s"`
	MaxWait         time.Duration `envconfig:"IDEMPOTENCY_MAX_WAIT" default:"30s"`
	LockTimeout     time.Duration `envconfig:"IDEMPOTENCY_LOCK_TIMEOUT" default:"60s"`
	KeyRetention    time.Duration `envconfig:"IDEMPOTENCY_KEY_RETENTION" default:"24h"`
	RetryAfter      time.Duration `envconfig:"RETRY_AFTER" default:"1s"`
	RateLimit       int           `envconfig:"TENANT_RATE_LIMIT" default:"100"`
	RateWindow      time.Duration `envconfig:"TENANT_RATE_WINDOW" default:"1s"`
	CrashPoint      string        `envconfig:"CRASH_POINT"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"35s"`
}

func (c config) validate() error {
	if c.LockTimeout <= c.MaxWait {
		return fmt.Errorf("IDEMPOTENCY_LOCK_TIMEOUT (%s) must exceed IDEMPOTENCY_MAX_WAIT (%s): a waiting request holds the key's lock", c.LockTimeout, c.MaxWait)
	}
	if c.RateLimit < 0 || (c.RateLimit > 0 && c.RateWindow < time.Second) {
		return fmt.Errorf("TENANT_RATE_LIMIT (%d) must be 0 (off) or positive, with TENANT_RATE_WINDOW (%s) at least 1s", c.RateLimit, c.RateWindow)
	}
	if c.DefaultWait > c.MaxWait {
		return fmt.Errorf("IDEMPOTENCY_DEFAULT_WAIT (%s) must not exceed IDEMPOTENCY_MAX_WAIT (%s)", c.DefaultWait, c.MaxWait)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// run reads its configuration from the environment and runs until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	logger := serve.NewLogger(stdout, slog.LevelInfo).With("process", "api")
	var cfg config
	if err := envconfig.Process("", &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	serve.LogConfig(logger, cfg)

	command := "serve"
	if len(args) > 0 {
		command = args[0]
	}
	switch command {
	case "migrate":
		if err := database.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		pool, err := database.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		return database.Migrate(ctx, pool, logger)
	case "seed":
		if cfg.AppEnv != "development" {
			return errors.New("seed creates demo tenants with public API keys: it runs only with APP_ENV=development")
		}
		pool, err := database.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		return (&tenants.Store{DB: pool}).SeedDemos(ctx)
	case "serve":
		return serveAPI(ctx, cfg, logger)
	default:
		return fmt.Errorf("unknown command %q: use serve, migrate or seed", command)
	}
}

// serveAPI wires the API together and serves until ctx ends.
func serveAPI(ctx context.Context, cfg config, logger *slog.Logger) error {
	riverLogger := logger.With("component", "river")
	// The API starts even while the database is down: it answers 503 and
	// /readyz says not ready until the database is back.
	pool, err := database.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		logger.Warn("database not reachable yet: failing closed until it is", "err", err)
	}
	inserter, err := outbox.NewInserter(pool, riverLogger)
	if err != nil {
		return err
	}

	listener := idempotency.NewListener(pool, logger)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before Wait: stops the listener when the server fails too
	wg.Go(func() { listener.Run(ctx) })

	crashAt, err := crash.Hook(cfg.CrashPoint, cfg.AppEnv, payments.CrashAfterFirstPhase)
	if err != nil {
		return err
	}
	if crashAt != nil {
		logger.Warn("crash point armed: this process will kill itself", "point", cfg.CrashPoint)
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	keys := &idempotency.Store{DB: pool, LockTimeout: cfg.LockTimeout, Retention: cfg.KeyRetention, Notifications: listener}
	api := &httpapi.Server{
		Tenants:     &tenants.Store{DB: pool},
		Payments:    &payments.Service{DB: pool, Keys: keys, Jobs: outbox.Queue{Client: inserter}, Render: httpapi.Renderer{}, Crash: crashAt},
		Keys:        keys,
		Logger:      logger,
		Ready:       pool.Ping,
		DefaultWait: cfg.DefaultWait,
		MaxWait:     cfg.MaxWait,
		RetryAfter:  cfg.RetryAfter,
		Registry:    registry,
		RateLimit:   httpapi.RateLimit{Requests: cfg.RateLimit, Window: cfg.RateWindow},
	}
	srv := &serve.Server{
		Addr:            cfg.Addr,
		Handler:         api.Handler(),
		Logger:          logger,
		WriteTimeout:    cfg.MaxWait + 15*time.Second,
		ShutdownTimeout: cfg.ShutdownTimeout,
	}
	return srv.Run(ctx)
}
