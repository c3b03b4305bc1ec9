// Package worker builds and runs the worker process: River running the jobs
// that drive every operation through its phases, the periodic reconciler and
// key reaper, and a small HTTP server on an internal address for /metrics,
// /healthz and River's dashboard. It also holds the worker binary's review
// command.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/secret"
	"github.com/example/payments/internal/tracing"
	"github.com/example/payments/internal/webhooks"
)

// Config is the configuration of the worker.
type Config struct {
	process.Common
	process.KeyRetention
	process.CrashPoint
	process.Webhooks
	process.Processor
	WebhookSchedule        webhooks.Schedule `envconfig:"WEBHOOK_RETRY_SCHEDULE" default:"5s,5m,30m,2h,5h,10h,14h,20h,24h" desc:"the wait before each retry of a webhook delivery, after a first attempt at once (each jittered by a tenth)"`
	MetricsAddr            string            `envconfig:"METRICS_ADDR" default:"127.0.0.1:9091" desc:"internal address of /metrics, /healthz and the River dashboard /riverui/; loopback only by default"`
	ProcessorTimeout       time.Duration     `envconfig:"PROCESSOR_TIMEOUT" default:"10s" desc:"timeout of one processor call"`
	ProcessorRateLimit     float64           `envconfig:"PROCESSOR_RATE_LIMIT" default:"0" desc:"requests a second to the processor from every worker together, counted in the database: the calls that make operations first, then lookups and fences, then the ledger's pages (0: the processor's own limit as its adapter declares it, Stripe's 25 in test mode and 100 in live mode; none for the fake)"`
	Concurrency            int               `envconfig:"WORKER_CONCURRENCY" default:"400" desc:"jobs run at once (operations, processor events, periodic jobs)"`
	WebhookConcurrency     int               `envconfig:"WEBHOOK_CONCURRENCY" default:"40" desc:"webhook deliveries to merchants run at once, in a queue of their own"`
	EndpointInFlight       int               `envconfig:"WEBHOOK_ENDPOINT_IN_FLIGHT" default:"8" desc:"webhook attempts in flight to one endpoint, across every worker; more wait in line, each woken by the attempt that frees a place"`
	TenantInFlight         int               `envconfig:"WEBHOOK_TENANT_IN_FLIGHT" default:"16" desc:"webhook attempts in flight for one tenant, across every worker: a tenant's share of the delivery workers"`
	DisableAfter           time.Duration     `envconfig:"WEBHOOK_DISABLE_AFTER" default:"120h" desc:"an endpoint whose every attempt has failed for this long is disabled (failing)"`
	JobTimeout             time.Duration     `envconfig:"JOB_TIMEOUT" default:"60s" desc:"one job attempt"`
	FetchPollInterval      time.Duration     `envconfig:"WORKER_POLL_INTERVAL" default:"100ms" desc:"queue poll, the backstop when a notification is missed"`
	MaxAttempts            int               `envconfig:"OPERATION_MAX_ATTEMPTS" default:"10" desc:"retry budget of every operation: attempts with an unknown outcome before it goes to the reconciler"`
	RetryBaseDelay         time.Duration     `envconfig:"RETRY_BASE_DELAY" default:"1s" desc:"first backoff"`
	RetryMaxDelay          time.Duration     `envconfig:"RETRY_MAX_DELAY" default:"1m" desc:"longest backoff"`
	Deadline               time.Duration     `envconfig:"OPERATION_DEADLINE" default:"1h" desc:"how long after its creation any operation may still be attempted; past it, one confirmed absent is given up through the fence"`
	ReconcileInterval      time.Duration     `envconfig:"RECONCILE_INTERVAL" default:"1m" desc:"how often each worker runs a reconcile pass (sweep and a batch), and the ledger comparison runs (0: never)"`
	ReconcileTimeout       time.Duration     `envconfig:"RECONCILE_TIMEOUT" default:"1m" desc:"bound on one reconcile pass (sweep and a batch), and the lease on the batch it claims; OPERATION_DEADLINE must cover the retry horizon, RECONCILE_INTERVAL and this"`
	LedgerTimeout          time.Duration     `envconfig:"LEDGER_COMPARE_TIMEOUT" default:"10m" desc:"bound on one comparison of the processor's ledger"`
	ReconcileWindow        time.Duration     `envconfig:"RECONCILE_WINDOW" default:"24h" desc:"how much of the processor's ledger is compared"`
	StuckAfter             time.Duration     `envconfig:"RECONCILE_STUCK_AFTER" default:"5m" desc:"how long an unfinished key may stay quiet"`
	ReconcileBatch         int               `envconfig:"RECONCILE_BATCH" default:"100" desc:"marked operations tried per run"`
	LedgerPageSize         int               `envconfig:"RECONCILE_LEDGER_PAGE" default:"0" desc:"ledger entries per page, up to the processor's largest (0: the largest)"`
	TombstoneRetention     time.Duration     `envconfig:"IDEMPOTENCY_TOMBSTONE_RETENTION" default:"720h" desc:"how long a reaped key answers 410"`
	ReapInterval           time.Duration     `envconfig:"REAP_INTERVAL" default:"1m" desc:"how often the reaper runs (0: never); a run reaps until nothing is left or JOB_TIMEOUT, so with a backlog it runs most of the time"`
	ReapBatch              int               `envconfig:"REAP_BATCH" default:"1000" desc:"keys or processor events reaped per statement"`
	ReapBatchTime          time.Duration     `envconfig:"REAP_BATCH_TIME" default:"20ms" desc:"how long one batch of the key reaper should take: its batches are sized to it, up to REAP_BATCH (0: every batch REAP_BATCH keys)"`
	ReapRest               float64           `envconfig:"REAP_REST" default:"0.75" desc:"the key reaper's rest after each batch, as a multiple of the batch's time, leaving the database to the service meanwhile (0: flat out)"`
	EventRetention         time.Duration     `envconfig:"PROCESSOR_EVENT_RETENTION" default:"720h" desc:"how long a processed processor webhook is kept, so that a late delivery of it is a duplicate"`
	WebhookEventRetention  time.Duration     `envconfig:"WEBHOOK_EVENT_RETENTION" default:"720h" desc:"how long an event, and its deliveries and their attempts once over, are kept (GET /v1/events answers for that long)"`
	WebhookSecretRetention time.Duration     `envconfig:"WEBHOOK_SECRET_RETENTION" default:"24h" desc:"how long an expired signing secret is kept before it is deleted"`

	// RiverUIPassword is a secret.String, so that the configuration logged
	// at start shows it masked.
	RiverUIUser     string        `envconfig:"RIVER_UI_USER" default:"admin" desc:"basic-auth user of the River dashboard"`
	RiverUIPassword secret.String `envconfig:"RIVER_UI_PASSWORD" desc:"basic-auth password of the River dashboard at /riverui/ on METRICS_ADDR; unset: no dashboard"`
}

func (c Config) backoff() jobs.Backoff {
	return jobs.Backoff{Base: c.RetryBaseDelay, Max: c.RetryMaxDelay}
}

// ReapPace is the key reaper's pace: REAP_BATCH, REAP_BATCH_TIME, REAP_REST.
func (c Config) ReapPace() idempotency.ReapPace {
	return idempotency.ReapPace{Batch: c.ReapBatch, Target: c.ReapBatchTime, Pause: c.ReapRest}
}

// Validate refuses settings under which a payment could be charged twice or
// left behind, naming the setting to change.
func (c Config) Validate() error {
	horizon := c.backoff().Horizon(c.MaxAttempts, c.JobTimeout)
	switch {
	case c.JobTimeout <= c.ProcessorTimeout:
		return fmt.Errorf("JOB_TIMEOUT (%s) must exceed PROCESSOR_TIMEOUT (%s), or a job is cancelled mid-call", c.JobTimeout, c.ProcessorTimeout)
	case c.Concurrency < 1 || c.WebhookConcurrency < 1 || c.MaxAttempts < 1 || c.ReconcileBatch < 1 || c.ReapBatch < 1 ||
		c.EndpointInFlight < 1 || c.TenantInFlight < 1:
		return fmt.Errorf("WORKER_CONCURRENCY, WEBHOOK_CONCURRENCY, WEBHOOK_ENDPOINT_IN_FLIGHT, WEBHOOK_TENANT_IN_FLIGHT, OPERATION_MAX_ATTEMPTS, RECONCILE_BATCH and REAP_BATCH must be at least 1")
	case c.ProcessorRateLimit < 0:
		return fmt.Errorf("PROCESSOR_RATE_LIMIT (%g) must not be negative (0: the processor's own limit)", c.ProcessorRateLimit)
	case c.DisableAfter <= 0:
		return fmt.Errorf("WEBHOOK_DISABLE_AFTER (%s) must be positive", c.DisableAfter)
	case c.ReapBatchTime < 0 || c.ReapRest < 0:
		return fmt.Errorf("REAP_BATCH_TIME (%s) and REAP_REST (%g) must not be negative", c.ReapBatchTime, c.ReapRest)
	case c.RetryBaseDelay <= 0 || c.RetryMaxDelay < c.RetryBaseDelay:
		return fmt.Errorf("RETRY_BASE_DELAY (%s) must be positive and at most RETRY_MAX_DELAY (%s)", c.RetryBaseDelay, c.RetryMaxDelay)
	case c.StuckAfter <= c.JobTimeout:
		return fmt.Errorf("RECONCILE_STUCK_AFTER (%s) must exceed JOB_TIMEOUT (%s), or running jobs look stuck", c.StuckAfter, c.JobTimeout)
	case c.Deadline < horizon:
		return fmt.Errorf("OPERATION_DEADLINE (%s) must be at least the jobs' retry horizon (%s, from OPERATION_MAX_ATTEMPTS, RETRY_*_DELAY and JOB_TIMEOUT), so the reconciler has the last word", c.Deadline, horizon)
	case c.ReconcileInterval > 0 && c.Deadline < c.reconciledBy(horizon):
		return fmt.Errorf("OPERATION_DEADLINE (%s) must be at least the worst-case time to reconcile (%s: the jobs' retry horizon, then RECONCILE_INTERVAL and a tenth for its jitter, then RECONCILE_TIMEOUT for the pass to reach it), or the reconciler gives up through the fence on operations it has not yet tried",
			c.Deadline, c.reconciledBy(horizon))
	case c.Processor.Validate() != nil:
		return c.Processor.Validate()
	case c.Deadline+c.JobTimeout > keyWindow(c.declared().KeyRetention):
		return fmt.Errorf("the processor (%s) keeps its idempotency keys %s: OPERATION_DEADLINE + JOB_TIMEOUT (%s), the last moment a call is made under a downstream key, must be within %s of it (a tenth kept for the clocks): shorten OPERATION_DEADLINE, or, where the processor's retention is one of its settings (-h), raise it; otherwise a call could reach the processor after it forgot the key and charge twice",
			c.Processor.Name, c.declared().KeyRetention, c.Deadline+c.JobTimeout, keyWindow(c.declared().KeyRetention))
	case c.ReconcileTimeout <= c.ProcessorTimeout || c.LedgerTimeout <= c.ProcessorTimeout:
		return fmt.Errorf("RECONCILE_TIMEOUT (%s) and LEDGER_COMPARE_TIMEOUT (%s) must exceed PROCESSOR_TIMEOUT (%s), or a run cannot make one call", c.ReconcileTimeout, c.LedgerTimeout, c.ProcessorTimeout)
	case c.Webhooks.Validate() != nil:
		return c.Webhooks.Validate()
	case c.WebhookEventRetention <= 0 || c.WebhookSecretRetention <= 0:
		return fmt.Errorf("WEBHOOK_EVENT_RETENTION (%s) and WEBHOOK_SECRET_RETENTION (%s) must be positive", c.WebhookEventRetention, c.WebhookSecretRetention)
	case c.EventRetention <= 0:
		return fmt.Errorf("PROCESSOR_EVENT_RETENTION (%s) must be positive", c.EventRetention)
	case c.TombstoneRetention <= 0:
		return fmt.Errorf("IDEMPOTENCY_TOMBSTONE_RETENTION (%s) must be positive: a reaped key's retry must be told it expired", c.TombstoneRetention)
	case c.declared().Ledger && (c.LedgerPageSize < 0 || c.LedgerPageSize > c.declared().LedgerPage):
		return fmt.Errorf("RECONCILE_LEDGER_PAGE (%d) must be from 1 to %d, the processor's page limit (0: that limit)", c.LedgerPageSize, c.declared().LedgerPage)
	case c.RiverUIPassword != "" && (c.RiverUIUser == "" || strings.Contains(c.RiverUIUser, ":")):
		// Basic auth sends "user:password": nobody could log in as these.
		return fmt.Errorf("RIVER_UI_USER (%q) must be set and free of ':' when RIVER_UI_PASSWORD is", c.RiverUIUser)
	}
	return c.Common.Validate()
}

// keyWindow is the part of a processor's key retention calls are made in:
// no path makes a call past OPERATION_DEADLINE (operation.Runner), and a
// tenth of the retention is kept for the database's clock and the
// processor's apart.
func keyWindow(retention time.Duration) time.Duration { return retention - retention/10 }

// declared is what the processor can do, as its adapter declares it with
// the settings read; Validate checks first that they were.
func (c Config) declared() operation.Processor { return c.Processor.Settings.Processor() }

// processor is the adapter of the processor cfg names, every call a span
// and paced on db (pace), and what the processor can do.
func (c Config) processor(db *pgxpool.Pool) (catalog.Processor, operation.Processor, error) {
	return catalog.Open(c.Processor.Settings, gateway.Options{Timeout: c.ProcessorTimeout, PageSize: c.LedgerPageSize,
		Tracer: c.Provider(), Pace: c.pace(db)})
}

// pace is the processor's rate limit kept on db: PROCESSOR_RATE_LIMIT, or
// the processor's own; nil when neither sets one.
func (c Config) pace(db *pgxpool.Pool) *gateway.Pace {
	rate := c.ProcessorRateLimit
	if rate == 0 {
		rate = c.declared().RateLimit
	}
	if rate == 0 {
		return nil
	}
	return &gateway.Pace{DB: db, Processor: c.Processor.Name, Rate: rate}
}

// reconciledBy is the worst-case time from an operation's creation to the
// reconciler's first try of it: its jobs' retry horizon, then the wait for
// the next pass of some worker, then that pass's own time.
func (c Config) reconciledBy(horizon time.Duration) time.Duration {
	return horizon + c.ReconcileInterval + c.ReconcileInterval/10 + c.ReconcileTimeout
}

// Worker is the worker process: River running the jobs that drive every
// operation through its phases, the periodic reconciler and key reaper, and
// a small HTTP server for /metrics, /healthz and River's dashboard.
type Worker struct {
	// The parts the jobs run, for tools and tests that drive them directly.
	Ops        *operation.Runner
	Reconciler *operation.Reconciler
	Sweeper    *operation.Sweeper
	Relay      *outbox.Relay
	Deliverer  *webhooks.Deliverer
	Keys       *idempotency.Store

	cfg       Config
	declared  operation.Processor // what the processor can do
	logger    *slog.Logger
	pool      *pgxpool.Pool
	session   *pgxpool.Pool // past the pooler, when there is one; else pool
	presence  *database.Presence
	river     *river.Client[pgx.Tx]
	http      *process.HTTPServer
	announcer *idempotency.Announcer
	dashboard *riverui.Handler // nil when RIVER_UI_PASSWORD is unset
}

// riverConns bounds the session pool of River's client when the worker
// runs through a pooler: its fetches, completions, leader and notifier.
const riverConns = 8

// announceCooldown is the shortest time between two announcements of
// finished keys: a waiting request learns of its key up to this much later,
// and the worker sends at most 1,000 notifications a second however many keys
// finish.
const announceCooldown = 1 * time.Millisecond

// queueTables are the service's tables whose rows live for moments: the
// outbox's staged jobs, the webhook places in flight and the lines. Every
// worker vacuums them each vacuumInterval (database.KeepVacuumed): the
// places are counted under a tenant's lock, and a count walks every dead
// entry in their indexes, thousands after a minute (autovacuum's pace,
// where it runs) and more without autovacuum, while every line behind it
// waits.
var queueTables = []string{"operation_outbox", "webhook_places", "webhook_line"}

const vacuumInterval = 10 * time.Second

// reconcileParallel is how many marked operations a reconcile pass settles
// at once: against a processor that drops requests each costs a
// PROCESSOR_TIMEOUT, and a batch tried one after the other would leave its
// last operations waiting long enough between two tries to pass their
// deadline. Each holds at most one of the pool's connections at a time.
const reconcileParallel = 8

// relayBatch is the most staged jobs the relay moves to River's queue in one
// transaction.
const relayBatch = 500

// New builds the worker from cfg and starts listening on
// cfg.MetricsAddr; Run starts working jobs. A worker that is not run must be
// closed.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Worker, error) {
	if err := process.CheckConfig(logger, cfg); err != nil {
		return nil, err
	}
	w, err := openDB(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := w.build(prometheus.NewRegistry()); err != nil {
		w.closeDB()
		return nil, err
	}
	return w, nil
}

// openDB opens the worker's pools, waiting for the database, and holds its
// presence.
func openDB(ctx context.Context, cfg Config, logger *slog.Logger) (*Worker, error) {
	// River's client, whose notifier LISTENs, runs on the session pool.
	pool, session, err := cfg.OpenPools(ctx, riverConns)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		process.ClosePools(pool, session)
		return nil, fmt.Errorf("ping database: %w", err)
	}
	// The worker's mark that it lives, past the pooler: the webhook places
	// it holds are freed as soon as it dies.
	presence, err := database.HoldPresence(ctx, cfg.Session(), logger)
	if err != nil {
		process.ClosePools(pool, session)
		return nil, pastPooler(cfg, err)
	}
	return &Worker{cfg: cfg, logger: logger, pool: pool, session: session, presence: presence}, nil
}

// pastPooler says, when the presence found a pooler that shares sessions
// where it connects, which setting must lead past it: the worker cannot
// start, and only the operator can fix it.
func pastPooler(cfg Config, err error) error {
	switch {
	case !errors.Is(err, database.ErrPresenceThroughPooler):
		return err
	case cfg.Pooled():
		return fmt.Errorf("%w: DATABASE_SESSION_URL leads through one; point it at Postgres directly "+
			"(or at a pooler in session mode)", err)
	default:
		return fmt.Errorf("%w: DATABASE_URL is one; set DATABASE_SESSION_URL to reach Postgres past it "+
			"(directly, or through a pooler in session mode)", err)
	}
}

// build makes, on the worker's open pools, the processor's client (paced
// on them), the parts that run its jobs, River's client and its internal
// HTTP server, listening; the metrics of each go in registry.
func (w *Worker) build(registry *prometheus.Registry) error {
	calls, declared, err := w.cfg.processor(w.pool)
	if err != nil {
		return err
	}
	w.declared = declared
	announceProcessor(w.logger, registry, declared)
	kinds := timedCalls(registry, catalog.Kinds(calls))
	if err := w.cfg.CrashPoint.Arm(w.cfg.AppEnv, w.logger, append(kinds.CrashPoints(), operation.CrashReconcileClaimed, outbox.CrashInRelay, webhooks.CrashAfterClaim)...); err != nil {
		return err
	}
	if err := w.buildOperations(registry, kinds); err != nil {
		return err
	}
	if err := w.buildRiver(registry); err != nil {
		return err
	}
	return w.listen(registry)
}

// buildOperations makes the machinery the jobs run: the key store and its
// announcer, the operations' runner, the webhook deliverer, the reconciler,
// the sweep and the outbox's relay, and the metrics of what they do.
func (w *Worker) buildOperations(registry *prometheus.Registry, kinds *operation.Registry) error {
	cfg, pool := w.cfg, w.pool
	w.announcer = idempotency.NewAnnouncer(pool, announceCooldown, w.logger)
	w.Keys = &idempotency.Store{DB: pool, Retention: cfg.KeyRetention.KeyRetention, TombstoneRetention: cfg.TombstoneRetention,
		Announcer: w.announcer}
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		reviewCollector(pool, kinds.ReviewKinds()))
	lister, err := jobs.NewInserter(pool, jobs.RelayCooldown, process.Quiet(w.logger))
	if err != nil {
		return err
	}
	queue := jobs.Queue{Client: lister, RescueAfter: jobs.RescueAfter(cfg.JobTimeout)}
	w.Ops = &operation.Runner{DB: pool, Keys: w.Keys, Kinds: kinds,
		MaxAttempts: cfg.MaxAttempts, Deadline: cfg.Deadline, Processor: w.declared, Observer: newOperationMetrics(registry, kinds.Types()),
		Subscribers: webhooks.FanOut{Jobs: queue}}
	// Deliveries send the trace of the event's settling on, as traceparent.
	deliveryClient := safehttp.Policy{AllowPrivate: cfg.AllowPrivate}.Client(webhooks.AttemptTimeout, cfg.EndpointInFlight)
	deliveryClient.Transport = tracing.Transport(deliveryClient.Transport, cfg.Provider())
	w.Deliverer = &webhooks.Deliverer{DB: pool, Cipher: cfg.SecretsKey, Schedule: cfg.WebhookSchedule,
		Client: deliveryClient,
		Events: &operation.Service{DB: pool}, Encode: render.Encode, Observer: newDeliveryMetrics(registry, pool),
		EndpointInFlight: cfg.EndpointInFlight, TenantInFlight: cfg.TenantInFlight, DisableAfter: cfg.DisableAfter, Jobs: queue,
		Worker: w.presence.ID}
	w.Reconciler = &operation.Reconciler{Ops: w.Ops, Logger: w.logger, Window: cfg.ReconcileWindow, Grace: cfg.StuckAfter,
		BatchSize: cfg.ReconcileBatch, Parallel: reconcileParallel, Lease: cfg.ReconcileTimeout, Worker: w.presence.ID, Tracer: cfg.Provider()}
	registry.MustRegister(backlogCollector(w.Keys, pool, queue, cfg.StuckAfter))
	w.Sweeper = &operation.Sweeper{DB: pool, Jobs: queue,
		StuckAfter: cfg.StuckAfter, BatchSize: cfg.ReconcileBatch}
	w.Relay = &outbox.Relay{DB: pool, Jobs: queue, BatchSize: relayBatch, Session: w.session, Poll: cfg.FetchPollInterval,
		Logger: w.logger}
	return nil
}

// buildRiver makes River's client, on the session pool, working the jobs
// with the machinery buildOperations made.
func (w *Worker) buildRiver(registry *prometheus.Registry) error {
	cfg := w.cfg
	var err error
	w.river, err = jobs.NewWorker(w.session, process.Quiet(w.logger), jobs.WorkerConfig{
		MaxWorkers:        cfg.Concurrency,
		WebhookWorkers:    cfg.WebhookConcurrency,
		JobTimeout:        cfg.JobTimeout,
		RescueAfter:       jobs.RescueAfter(cfg.JobTimeout),
		Backoff:           cfg.backoff(),
		FetchPollInterval: cfg.FetchPollInterval,
		LedgerTimeout:     cfg.LedgerTimeout,
		ReconcileInterval: cfg.ReconcileInterval,
		CompareLedger:     w.declared.Ledger,
		ReapInterval:      cfg.ReapInterval,
	}, jobs.Deps{Ops: w.Ops, Reconciler: w.Reconciler, Keys: w.Keys, ReapPace: cfg.ReapPace(),
		EventRetention: cfg.EventRetention, Webhooks: webhooks.Retention{Events: cfg.WebhookEventRetention, Secrets: cfg.WebhookSecretRetention}, Deliverer: w.Deliverer, Reaped: newReapMetrics(registry), Logger: w.logger, Tracer: cfg.Provider(),
		Registry: registry})
	return err
}

// listen starts the internal HTTP server on cfg.MetricsAddr: /metrics,
// /healthz, and River's dashboard when RIVER_UI_PASSWORD is set.
func (w *Worker) listen(registry *prometheus.Registry) error {
	var err error
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(registry))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, `{"status":"ok"}`) })
	// The dashboard shows and changes River's jobs, so it is on this internal
	// listener only, never the API's port, and only with a password.
	if w.cfg.RiverUIPassword == "" {
		w.logger.Info("River dashboard off: RIVER_UI_PASSWORD is unset")
	} else {
		if w.dashboard, err = newDashboard(w.river, process.Quiet(w.logger)); err != nil {
			return err
		}
		mux.Handle(dashboardPrefix+"/", denyFraming(protectDashboard(w.cfg.RiverUIUser, w.cfg.RiverUIPassword, w.dashboard)))
	}
	w.http, err = process.Listen(w.cfg.MetricsAddr, mux, w.logger, 10*time.Second, 5*time.Second)
	return err
}

// MetricsAddr is where the worker serves /metrics.
func (w *Worker) MetricsAddr() string { return w.http.Addr() }

// Run works jobs until ctx ends; then it stops fetching, lets running jobs
// finish within the shutdown timeout, cancels what is left, and closes the
// worker.
func (w *Worker) Run(ctx context.Context) error {
	defer w.closeDB()
	metricsCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopMetrics()
	if w.dashboard != nil {
		// Its background counts run as long as the server that shows them,
		// through the jobs' graceful stop. They end on their own when
		// metricsCtx does (riverui has no Stop to wait on): they wait on
		// timers, and their queries take that context.
		if err := w.dashboard.Start(metricsCtx); err != nil {
			w.http.Close()
			return fmt.Errorf("start river dashboard: %w", err)
		}
	}
	wg.Go(func() {
		if err := w.http.Run(metricsCtx); err != nil {
			w.logger.Error("metrics server", "err", err)
		}
	})
	// Announces what jobs finish until they have all stopped.
	wg.Go(func() { w.announcer.Run(metricsCtx) })
	// Moves the jobs first phases staged to River until shutdown begins.
	wg.Go(func() { w.Relay.Run(ctx) })
	// Sweeps the webhook lines, in every worker, until shutdown begins.
	wg.Go(func() { w.Deliverer.SweepLines(ctx, webhooks.SweepLineInterval, w.logger) })
	wg.Go(func() { database.KeepVacuumed(ctx, w.pool, vacuumInterval, w.logger, queueTables...) })

	// Cancelling Start's context would cancel running jobs at once; the end
	// of ctx starts a graceful Stop below instead.
	if err := w.river.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	w.logger.Info("working jobs")
	if w.cfg.ReconcileInterval > 0 {
		// Stops with ctx: a pass cut short is safe, each phase being its
		// own transaction, and the next pass of any worker resumes it.
		wg.Go(func() { w.Reconciler.Loop(ctx, w.Sweeper, w.cfg.ReconcileInterval, w.cfg.ReconcileTimeout) })
	}
	<-ctx.Done()

	w.logger.Info("shutting down: finishing running jobs")
	soft, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
	defer cancel()
	if err := w.river.Stop(soft); err != nil {
		w.logger.Warn("jobs still running at the shutdown timeout: cancelling them", "err", err)
		hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return w.river.StopAndCancel(hard)
	}
	return nil
}

// Close releases a worker that was never run.
func (w *Worker) Close() {
	w.http.Close()
	w.closeDB()
}

// closeDB ends the worker's presence and closes its pools.
func (w *Worker) closeDB() {
	w.presence.Close()
	process.ClosePools(w.pool, w.session)
}
