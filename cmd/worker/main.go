// Command worker runs the River jobs that drive payments through their
// phases, calling the card processor over HTTP.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/gateway"
	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/serve"
)

// config is read from the environment; see the README for each variable.
type config struct {
	DatabaseURL       string        `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"`
	ProcessorURL      string        `envconfig:"PROCESSOR_URL" default:"http://127.0.0.1:8090"`
	ProcessorTimeout  time.Duration `envconfig:"PROCESSOR_TIMEOUT" default:"10s"`
	Concurrency       int           `envconfig:"WORKER_CONCURRENCY" default:"10"`
	JobTimeout        time.Duration `envconfig:"JOB_TIMEOUT" default:"60s"`
	FetchPollInterval time.Duration `envconfig:"WORKER_POLL_INTERVAL" default:"1s"`
	KeyRetention      time.Duration `envconfig:"IDEMPOTENCY_KEY_RETENTION" default:"24h"`
	ShutdownTimeout   time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"30s"`
}

func (c config) validate() error {
	if c.JobTimeout <= c.ProcessorTimeout {
		return fmt.Errorf("JOB_TIMEOUT (%s) must exceed PROCESSOR_TIMEOUT (%s), or a job is cancelled mid-call", c.JobTimeout, c.ProcessorTimeout)
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("WORKER_CONCURRENCY (%d) must be at least 1", c.Concurrency)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run reads its configuration from the environment and works jobs until ctx
// ends; then it stops fetching, lets running jobs finish within
// SHUTDOWN_TIMEOUT, and cancels what is left.
func run(ctx context.Context, stdout io.Writer) error {
	logger := serve.NewLogger(stdout, slog.LevelInfo).With("process", "worker")
	// River reports every few seconds at info level; keep its warnings only.
	riverLogger := serve.NewLogger(stdout, slog.LevelWarn).With("process", "worker", "component", "river")
	var cfg config
	if err := envconfig.Process("", &cfg); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	serve.LogConfig(logger, cfg)

	pool, err := database.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	charger := &payments.Charger{
		DB:        pool,
		Keys:      &idempotency.Store{DB: pool, Now: time.Now, Retention: cfg.KeyRetention},
		Processor: gateway.New(cfg.ProcessorURL, cfg.ProcessorTimeout),
		Render:    httpapi.PaymentResponse,
		Now:       time.Now,
	}
	client, err := outbox.NewWorker(pool, riverLogger, outbox.WorkerConfig{
		MaxWorkers:        cfg.Concurrency,
		JobTimeout:        cfg.JobTimeout,
		FetchPollInterval: cfg.FetchPollInterval,
	}, charger)
	if err != nil {
		return err
	}
	// Cancelling Start's context would cancel running jobs at once; the
	// signal starts a graceful Stop below instead.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	logger.Info("working jobs")
	<-ctx.Done()

	logger.Info("shutting down: finishing running jobs")
	soft, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := client.Stop(soft); err != nil {
		logger.Warn("jobs still running at the shutdown timeout: cancelling them", "err", err)
		hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return client.StopAndCancel(hard)
	}
	return nil
}
