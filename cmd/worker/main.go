// Command worker runs the River jobs that drive payments and refunds through
// their phases, calling the card processor over HTTP, and the periodic
// reconciler and key reaper. It serves its metrics on METRICS_ADDR.
// "worker review" lists the needs-review queue; "worker review resolve ID"
// closes a case.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/example/payments/internal/crash"
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
	DatabaseURL           string        `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable"`
	AppEnv                string        `envconfig:"APP_ENV" default:"production"`
	MetricsAddr           string        `envconfig:"METRICS_ADDR" default:":9091"`
	ProcessorURL          string        `envconfig:"PROCESSOR_URL" default:"http://127.0.0.1:8090"`
	ProcessorTimeout      time.Duration `envconfig:"PROCESSOR_TIMEOUT" default:"10s"`
	ProcessorKeyRetention time.Duration `envconfig:"PROCESSOR_KEY_RETENTION" default:"168h"`
	Concurrency           int           `envconfig:"WORKER_CONCURRENCY" default:"10"`
	JobTimeout            time.Duration `envconfig:"JOB_TIMEOUT" default:"60s"`
	FetchPollInterval     time.Duration `envconfig:"WORKER_POLL_INTERVAL" default:"1s"`
	MaxAttempts           int           `envconfig:"CHARGE_MAX_ATTEMPTS" default:"10"`
	RetryBaseDelay        time.Duration `envconfig:"RETRY_BASE_DELAY" default:"1s"`
	RetryMaxDelay         time.Duration `envconfig:"RETRY_MAX_DELAY" default:"1m"`
	ChargeDeadline        time.Duration `envconfig:"CHARGE_DEADLINE" default:"1h"`
	ReconcileInterval     time.Duration `envconfig:"RECONCILE_INTERVAL" default:"1m"`
	ReconcileTimeout      time.Duration `envconfig:"RECONCILE_TIMEOUT" default:"10m"`
	ReconcileWindow       time.Duration `envconfig:"RECONCILE_WINDOW" default:"24h"`
	StuckAfter            time.Duration `envconfig:"RECONCILE_STUCK_AFTER" default:"5m"`
	ReconcileBatch        int           `envconfig:"RECONCILE_BATCH" default:"100"`
	LedgerPageSize        int           `envconfig:"RECONCILE_LEDGER_PAGE" default:"1000"`
	KeyRetention          time.Duration `envconfig:"IDEMPOTENCY_KEY_RETENTION" default:"24h"`
	TombstoneRetention    time.Duration `envconfig:"IDEMPOTENCY_TOMBSTONE_RETENTION" default:"720h"`
	ReapInterval          time.Duration `envconfig:"REAP_INTERVAL" default:"10m"`
	ReapBatch             int           `envconfig:"REAP_BATCH" default:"1000"`
	CrashPoint            string        `envconfig:"CRASH_POINT"`
	ShutdownTimeout       time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"30s"`
}

func (c config) backoff() outbox.Backoff {
	return outbox.Backoff{Base: c.RetryBaseDelay, Max: c.RetryMaxDelay}
}

// validate refuses settings under which a payment could be charged twice or
// left behind, naming the setting to change.
func (c config) validate() error {
	horizon := c.backoff().Horizon(c.MaxAttempts, c.JobTimeout)
	switch {
	case c.JobTimeout <= c.ProcessorTimeout:
		return fmt.Errorf("JOB_TIMEOUT (%s) must exceed PROCESSOR_TIMEOUT (%s), or a job is cancelled mid-call", c.JobTimeout, c.ProcessorTimeout)
	case c.Concurrency < 1 || c.MaxAttempts < 1 || c.ReconcileBatch < 1 || c.ReapBatch < 1:
		return fmt.Errorf("WORKER_CONCURRENCY, CHARGE_MAX_ATTEMPTS, RECONCILE_BATCH and REAP_BATCH must be at least 1")
	case c.TombstoneRetention <= 0:
		return fmt.Errorf("IDEMPOTENCY_TOMBSTONE_RETENTION (%s) must be positive: a reaped key's retry must be told it expired", c.TombstoneRetention)
	case c.LedgerPageSize < 1 || c.LedgerPageSize > 1000:
		return fmt.Errorf("RECONCILE_LEDGER_PAGE (%d) must be from 1 to 1000, the processor's page limit", c.LedgerPageSize)
	case c.RetryBaseDelay <= 0 || c.RetryMaxDelay < c.RetryBaseDelay:
		return fmt.Errorf("RETRY_BASE_DELAY (%s) must be positive and at most RETRY_MAX_DELAY (%s)", c.RetryBaseDelay, c.RetryMaxDelay)
	case c.StuckAfter <= c.JobTimeout:
		return fmt.Errorf("RECONCILE_STUCK_AFTER (%s) must exceed JOB_TIMEOUT (%s), or running jobs look stuck", c.StuckAfter, c.JobTimeout)
	case c.ChargeDeadline < horizon:
		return fmt.Errorf("CHARGE_DEADLINE (%s) must be at least the charge job's retry horizon (%s, from CHARGE_MAX_ATTEMPTS, RETRY_*_DELAY and JOB_TIMEOUT), so the reconciler has the last word", c.ChargeDeadline, horizon)
	case c.ProcessorKeyRetention <= c.ChargeDeadline+c.JobTimeout+c.KeyRetention:
		return fmt.Errorf("PROCESSOR_KEY_RETENTION (%s) must exceed CHARGE_DEADLINE + JOB_TIMEOUT + IDEMPOTENCY_KEY_RETENTION (%s): raise PROCESSOR_KEY_RETENTION on the processor and here, or shorten the others; otherwise a retry could reach the processor after it forgot the key and charge twice",
			c.ProcessorKeyRetention, c.ChargeDeadline+c.JobTimeout+c.KeyRetention)
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// run reads its configuration from the environment and works jobs until ctx
// ends; then it stops fetching, lets running jobs finish within
// SHUTDOWN_TIMEOUT, and cancels what is left. With args "review ..." it runs
// the operator's review command instead.
func run(ctx context.Context, args []string, stdout io.Writer) error {
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
	if len(args) > 0 {
		if args[0] != "review" {
			return fmt.Errorf("unknown command %q: use review, or no command to work jobs", args[0])
		}
		return review(ctx, cfg.DatabaseURL, args[1:], stdout)
	}
	crashAt, err := crash.Hook(cfg.CrashPoint, cfg.AppEnv, payments.CrashPoints()...)
	if err != nil {
		return err
	}
	serve.LogConfig(logger, cfg)
	if crashAt != nil {
		logger.Warn("crash point armed: this process will kill itself", "point", cfg.CrashPoint)
	}

	pool, err := database.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		reviewCollector{db: pool})

	gw := gateway.New(cfg.ProcessorURL, cfg.ProcessorTimeout)
	gw.PageSize = cfg.LedgerPageSize
	keys := &idempotency.Store{DB: pool, Retention: cfg.KeyRetention, TombstoneRetention: cfg.TombstoneRetention}
	ops := &payments.Operations{
		DB: pool, Keys: keys, Processor: gw, Render: httpapi.Renderer{},
		MaxAttempts: cfg.MaxAttempts, Deadline: cfg.ChargeDeadline, Crash: crashAt,
	}
	rescueAfter := outbox.RescueAfter(cfg.JobTimeout)
	client, err := outbox.NewWorker(pool, riverLogger, outbox.WorkerConfig{
		MaxWorkers:        cfg.Concurrency,
		JobTimeout:        cfg.JobTimeout,
		RescueAfter:       rescueAfter,
		Backoff:           cfg.backoff(),
		FetchPollInterval: cfg.FetchPollInterval,
		ReconcileTimeout:  cfg.ReconcileTimeout,
		ReconcileInterval: cfg.ReconcileInterval,
		ReapInterval:      cfg.ReapInterval,
	}, outbox.Deps{
		Ops: ops,
		Reconciler: &payments.Reconciler{Ops: ops, Logger: logger, Window: cfg.ReconcileWindow, Grace: cfg.StuckAfter,
			BatchSize: cfg.ReconcileBatch},
		Sweeper: &payments.Sweeper{DB: pool, Jobs: outbox.Queue{DB: pool, RescueAfter: rescueAfter},
			StuckAfter: cfg.StuckAfter, BatchSize: cfg.ReconcileBatch},
		Keys:      keys,
		ReapBatch: cfg.ReapBatch,
		Logger:    logger,
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	metricsCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMetrics()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		srv := &serve.Server{Addr: cfg.MetricsAddr, Handler: mux, Logger: logger, WriteTimeout: 10 * time.Second, ShutdownTimeout: 5 * time.Second}
		if err := srv.Run(metricsCtx); err != nil {
			logger.Error("metrics server", "err", err)
		}
	})

	// Cancelling Start's context would cancel running jobs at once; the
	// signal starts a graceful Stop below instead.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	logger.Info("working jobs")
	<-ctx.Done()

	logger.Info("shutting down: finishing running jobs")
	defer stopMetrics()
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
