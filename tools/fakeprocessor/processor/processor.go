// Package processor builds and runs the fake card processor process: the
// fakeprocessor HTTP API on its own port, its webhook sender, and the pool
// holding its ledger.
package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/fakeprocessor"
)

// Config is the configuration of the fake card processor.
type Config struct {
	process.Common
	// KeyRetention is the worker's PROCESSOR_KEY_RETENTION too (package
	// fake's Settings): the worker refuses to start if it is too short.
	KeyRetention time.Duration `envconfig:"PROCESSOR_KEY_RETENTION" default:"168h" desc:"how long the processor remembers its idempotency keys"`
	Addr         string        `envconfig:"PROCESSOR_ADDR" default:":8090" desc:"address to listen on"`
	InternalAddr string        `envconfig:"PROCESSOR_INTERNAL_ADDR" default:":9093" desc:"address of /metrics and /healthz for operators: internal, never the public port"`
	FailRate     float64       `envconfig:"PROCESSOR_FAIL_RATE" default:"0" desc:"chaos: share of POSTs answered 500 before charging (0 to 1)"`
	DropRate     float64       `envconfig:"PROCESSOR_DROP_RATE" default:"0" desc:"chaos: share of new results committed and then not answered (0 to 1)"`
	Latency      time.Duration `envconfig:"PROCESSOR_LATENCY" default:"0s" desc:"chaos: latency added to every request"`
	RateLimit    float64       `envconfig:"PROCESSOR_CHAOS_RATE_LIMIT" default:"0" desc:"chaos: requests a second answered, more answered 429 with Retry-After (0: no limit)"`
	ExecLatency  time.Duration `envconfig:"PROCESSOR_EXEC_LATENCY" default:"0s" desc:"chaos: time a charge or refund takes inside the processor, its key held, whether or not the caller waits"`
	TimeoutHang  time.Duration `envconfig:"PROCESSOR_TIMEOUT_HANG" default:"60s" desc:"how long pm_card_timeout withholds its answer"`

	WebhookURL string `envconfig:"PROCESSOR_WEBHOOK_URL" desc:"where every charge and refund outcome is POSTed as a webhook; unset: no webhooks"`
	// WebhookSecret prints as the number of secrets it holds, never them.
	WebhookSecret        signing.Secrets `envconfig:"PROCESSOR_WEBHOOK_SECRET" desc:"whsec_ secrets, comma-separated, each signing every webhook (list the new one too while rotating); required with PROCESSOR_WEBHOOK_URL"`
	WebhookRetryHorizon  time.Duration   `envconfig:"PROCESSOR_WEBHOOK_RETRY_HORIZON" default:"72h" desc:"how long after an event a failing webhook is retried before it is abandoned"`
	WebhookPollInterval  time.Duration   `envconfig:"PROCESSOR_WEBHOOK_POLL_INTERVAL" default:"200ms" desc:"how often the sender looks for webhooks due (retries, delayed ones, those a stopped processor left)"`
	WebhookDropRate      float64         `envconfig:"PROCESSOR_WEBHOOK_DROP_RATE" default:"0" desc:"chaos: share of webhook events recorded as dropped and never sent (0 to 1)"`
	WebhookDuplicateRate float64         `envconfig:"PROCESSOR_WEBHOOK_DUPLICATE_RATE" default:"0" desc:"chaos: share of webhook attempts sent twice at once (0 to 1)"`
	WebhookDelay         time.Duration   `envconfig:"PROCESSOR_WEBHOOK_DELAY" default:"0s" desc:"chaos: each webhook's first attempt waits a random share of this, so that they arrive out of order"`
}

// Validate checks what the processor shares with the others, and that
// webhooks are signed; its own settings are checked by fakeprocessor.New.
func (c Config) Validate() error {
	if c.WebhookURL != "" && c.WebhookSecret.Empty() {
		return errors.New("PROCESSOR_WEBHOOK_URL is set without PROCESSOR_WEBHOOK_SECRET")
	}
	return c.Common.Validate()
}

// Processor is the fake card processor process: its HTTP API, its webhook
// sender and the database pool holding its ledger and webhook queue.
type Processor struct {
	pool     *pgxpool.Pool
	server   *fakeprocessor.Server
	http     *process.HTTPServer
	internal *process.HTTPServer
	logger   *slog.Logger
}

// New builds the fake processor from cfg, applies its migrations (its own
// schema: the service's migrations know nothing of it) and starts listening
// on cfg.Addr; Run serves. A processor that is not run must be closed.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	process.LogConfig(logger, cfg)
	// Past the pooler, when there is one (DATABASE_SESSION_URL): a real
	// processor is not in our database at all, so its stand-in connects
	// straight to Postgres, where its migrations' session lock and pgx's
	// prepared statements work, rather than through the service's pooler.
	pool, err := database.Connect(ctx, cfg.Session(), cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	if err := fakeprocessor.Migrate(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, err
	}
	server, err := fakeprocessor.New(pool, logger, fakeprocessor.Config{
		Chaos: fakeprocessor.Chaos{
			FailRate:    cfg.FailRate,
			DropRate:    cfg.DropRate,
			Latency:     cfg.Latency,
			RateLimit:   cfg.RateLimit,
			ExecLatency: cfg.ExecLatency,

			WebhookDropRate:      cfg.WebhookDropRate,
			WebhookDuplicateRate: cfg.WebhookDuplicateRate,
			WebhookDelay:         cfg.WebhookDelay,
		},
		TimeoutHang:    cfg.TimeoutHang,
		TracerProvider: cfg.Provider(),
		KeyRetention:   cfg.KeyRetention,
		Webhooks: fakeprocessor.Webhooks{
			URL:          cfg.WebhookURL,
			Secrets:      cfg.WebhookSecret,
			RetryHorizon: cfg.WebhookRetryHorizon,
			PollInterval: cfg.WebhookPollInterval,
		},
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("configuration: %w", err)
	}
	// A response may legitimately take the latency, the execution and the
	// hang limit.
	writeTimeout := cfg.Latency + cfg.ExecLatency + cfg.TimeoutHang + 30*time.Second
	h, err := process.Listen(cfg.Addr, server, logger, writeTimeout, 15*time.Second)
	if err != nil {
		pool.Close()
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		eventsCollector{db: pool})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(registry))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	internal, err := process.Listen(cfg.InternalAddr, mux, logger, 10*time.Second, 5*time.Second)
	if err != nil {
		h.Close()
		pool.Close()
		return nil, err
	}
	return &Processor{pool: pool, server: server, http: h, internal: internal, logger: logger}, nil
}

// InternalAddr is where the processor serves /metrics.
func (p *Processor) InternalAddr() string { return p.internal.Addr() }

// Addr is where the processor listens.
func (p *Processor) Addr() string { return p.http.Addr() }

// Run serves and sends webhooks until ctx ends, then shuts down gracefully
// and closes the processor. Requests held by pm_card_timeout answer as soon
// as shutdown starts, instead of holding it up for the hang limit. The
// webhook sender stops claiming once the last request is answered and
// finishes the deliveries in flight; events not yet sent stay pending in the
// database, for the next processor on it to send.
func (p *Processor) Run(ctx context.Context) error {
	defer p.pool.Close()
	stop := context.AfterFunc(ctx, p.server.Close)
	defer stop()

	sendCtx, stopSending := context.WithCancel(context.WithoutCancel(ctx))
	var sender sync.WaitGroup
	sender.Go(func() { p.server.SendWebhooks(sendCtx) })
	sender.Go(func() {
		if err := p.internal.Run(sendCtx); err != nil {
			p.logger.Error("internal listener", "err", err)
		}
	})
	err := p.http.Run(ctx)
	stopSending()
	sender.Wait()
	return err
}

// Close releases a processor that was never run.
func (p *Processor) Close() {
	p.http.Close()
	p.internal.Close()
	p.pool.Close()
}
