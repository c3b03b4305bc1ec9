// Package bench measures the service against the machine it runs on. In one
// run, on one fresh database with durability on, it measures two ceilings
// through pgx at the same concurrency (one-row inserts, point selects) and
// then each mode of the service, and prints each mode as a ratio to its
// ceiling, so that a figure means the same on a noisy, shared machine. The
// modes the floors read run in turns with their reference (alternate):
//
//   - new keys answered asynchronously (the API's own path, worker stopped),
//     against the insert ceiling;
//   - replays of finished keys, against a bare handler making one point
//     select;
//   - payments waited for end to end (API, worker, processor), against the
//     insert ceiling, and at low concurrency for latency;
//   - new keys again with millions of finished keys in the table, against
//     the insert ceiling and so against the empty table;
//   - when asked for (RetentionKeys), new keys while the reaper reaps that
//     many expired keys, against new keys without it (retention.go).
package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/tracing"
	"github.com/example/payments/tools/fakeprocessor/processor"
)

// Config is one run.
type Config struct {
	// DatabaseURL is a migrated, empty database the run may fill.
	DatabaseURL string
	Clients     int
	// Duration is how long each mode is measured.
	Duration time.Duration
	// BigTable is how many finished keys the last mode puts in the table.
	BigTable int
	// ProfileDir, when set, receives a CPU profile of each mode.
	ProfileDir string
	// RetentionKeys, when positive, adds the retention mode (retention.go):
	// that many expired keys, and as many expired tombstones, reaped while
	// new keys are measured. Zero leaves it out.
	RetentionKeys int
	// RetentionDuration is how long the retention mode measures, in slices
	// of Duration, the reaper off in one and on in the next; zero means two
	// slices. It ends sooner once the reaper has caught up.
	RetentionDuration time.Duration
	// RetentionOnly runs the retention mode alone: no ceilings, no other
	// mode.
	RetentionOnly bool
	// RetentionPace, when set, is the retention mode's reaper's pace
	// instead of the worker's default (a zero Batch: REAP_BATCH).
	RetentionPace *idempotency.ReapPace
}

// Result is one mode measured.
type Result struct {
	Mode          string
	Clients       int
	Ops           int
	PerSecond     float64
	P50, P90, P99 time.Duration
	// Ceiling names what PerSecond is divided by; Ratio is the quotient.
	Ceiling string
	Ratio   float64
}

// Report is a run: each mode measured, and where the explained modes' time
// went.
type Report struct {
	Results   []Result
	Explained []Explained
	// Hops is where the time of the 4-client end-to-end mode's payments went,
	// by the database's clock; ClientHops what that clock cannot see, by the
	// client's and a listener's (timeline).
	Hops, ClientHops []Hop
	// CPU is what the modes in turns and the 4-client end-to-end mode cost
	// the machine's processors, by mode; empty where they cannot be read.
	CPU map[string]CPU
	// Floors are what the run held and missed, read off Results.
	Floors []Floor
	// Retention is the retention mode, when it ran.
	Retention *RetentionResult
}

// Run measures everything and writes a progress line per mode, the results
// table and where the time went to out.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	var report Report
	err := run(ctx, cfg, out, &report)
	return report, err
}

func run(ctx context.Context, cfg Config, out io.Writer, report *Report) error {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL+"&pool_max_conns="+strconv.Itoa(cfg.Clients))
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := (&tenants.Store{DB: pool}).SeedDemos(ctx); err != nil {
		return err
	}
	var insert, sel Result
	if !cfg.RetentionOnly {
		if insert, sel, err = ceilings(ctx, pool, cfg, out); err != nil {
			return err
		}
	}
	stats := newStatStatements(ctx, pool, out)

	// The processes log as the binaries do (JSON, info and above), to
	// nowhere: the request log line's cost is in every figure.
	logger := process.NewLogger(io.Discard, "json", slog.LevelInfo)
	st, err := start(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	defer st.stop()
	client := sender{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients * 2}, Timeout: 30 * time.Second}}
	defer client.http.CloseIdleConnections()
	r := &runner{ctx: ctx, cfg: cfg, out: out, pool: pool, stats: stats, st: st, logger: logger, send: client.post, report: report}
	if cfg.RetentionOnly {
		if err := r.retain(); err != nil {
			return err
		}
		PrintRetention(out, *report.Retention)
		return nil
	}

	r.results = []Result{insert, sel}
	report.CPU = map[string]CPU{}
	insertRef := reference{insert.Mode, insertRow(ctx, pool)}
	bare, bareSelect, err := r.bareModes(insert, sel)
	if err != nil {
		return err
	}
	defer bare.Close()
	if err := r.apiModes(insertRef, bareSelect); err != nil {
		return err
	}
	if err := r.endToEndModes(insertRef, insert); err != nil {
		return err
	}
	if cfg.BigTable > 0 {
		if err := r.bigTableMode(insertRef); err != nil {
			return err
		}
	}
	if err := r.retain(); err != nil {
		return err
	}
	// The peak RSS at BENCH_CLIENTS, before the slow processor's modes
	// (last: hundreds of clients and two more workers).
	r.hwm, _ = peakRSS()
	if err := r.slowModes(insert); err != nil {
		return err
	}
	r.print()
	return nil
}

// The modes whose time is explained: where the first phase's time goes.
const (
	newKeysMode = "new keys, async, worker stopped"
	// The limited modes are each a ratio to its unlimited mode.
	limitedNewKeysMode = "new keys, async, worker stopped, tenant limit on"
	limitedReplaysMode = "replays, tenant limit on"
	replaysMode        = "replays"
	// bigTableMode is the new keys' mode with its count of finished keys.
	bigTableMode = "new keys, async, %d finished keys"
)

// explain tells the modes whose statements are read from
// pg_stat_statements: the API's two paths, and every process's statements a
// payment end to end (the 4-client mode's, with no reference in turns).
func explain(mode string) bool {
	return mode == newKeysMode || mode == replaysMode || mode == endToEnd4Mode
}

// Print writes the results table.
func Print(out io.Writer, results []Result) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tclients\tper second\tp50\tp90\tp99\tratio\tto\t")
	for _, r := range results {
		ratio := ""
		if r.Ceiling != "" {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", r.Mode, r.Clients, r.PerSecond,
			r.P50.Round(10*time.Microsecond), r.P90.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), ratio, r.Ceiling)
	}
	_ = tw.Flush()
}

// stack is the service, in this process, built by the process constructors.
type stack struct {
	apiURL string
	// api is the API's configuration, for another API of the same.
	api api.Config
	// worker is the worker's configuration, for the reaper's settings.
	worker worker.Config
	w      *worker.Worker
	cancel context.CancelFunc
	wg     sync.WaitGroup

	workerCancel context.CancelFunc
	workerDone   chan struct{}
	// workerRan is whether the worker was ever run: one that was not must
	// be closed.
	workerRan bool
}

// start builds the processor and the API, serving, and the worker, not yet
// working: the first mode measures the API alone.
func start(ctx context.Context, dbURL string, logger *slog.Logger) (*stack, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &stack{cancel: cancel}
	var pcfg processor.Config
	var acfg api.Config
	var wcfg worker.Config
	for _, c := range []any{&pcfg, &acfg, &wcfg} {
		if err := process.Load(c); err != nil {
			return nil, err
		}
	}
	// A key of its own for the webhook endpoints' secrets: the bench
	// registers none, and the API and the worker refuse to start without.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, w := range []*process.Webhooks{&acfg.Webhooks, &wcfg.Webhooks} {
		if err := w.SecretsKey.Decode(base64.StdEncoding.EncodeToString(key)); err != nil {
			return nil, err
		}
	}
	// Tracing as the binaries run it by default (OTEL_TRACES_EXPORTER=none):
	// a real provider, whose spans exist and give the logs their trace ids,
	// exported nowhere. Its cost is in every figure.
	for _, c := range []*process.Common{&pcfg.Common, &acfg.Common, &wcfg.Common} {
		tp, err := tracing.NewProvider(ctx, tracing.OTel{Exporter: tracing.ExporterNone}, "bench", io.Discard)
		if err != nil {
			return nil, err
		}
		c.TracerProvider = tp
	}
	pcfg.DatabaseURL, pcfg.Addr, pcfg.InternalAddr = dbURL, "127.0.0.1:0", "127.0.0.1:0"
	p, err := processor.New(ctx, pcfg, logger)
	if err != nil {
		return nil, err
	}
	s.wg.Go(func() { _ = p.Run(ctx) })
	acfg.DatabaseURL, acfg.Addr, acfg.InternalAddr, acfg.RateLimit = dbURL, "127.0.0.1:0", "127.0.0.1:0", 0
	if acfg.Processor, err = process.NewProcessor(fake.Adapter); err != nil {
		return nil, err
	}
	a, err := api.New(ctx, acfg, logger)
	if err != nil {
		return nil, err
	}
	s.wg.Go(func() { _ = a.Run(ctx) })
	s.apiURL, s.api = "http://"+a.Addr(), acfg
	wcfg.DatabaseURL, wcfg.MetricsAddr = dbURL, "127.0.0.1:0"
	if wcfg.Processor, err = process.NewProcessor(fake.Adapter); err != nil {
		return nil, err
	}
	wcfg.Processor.Settings.(*fake.Settings).URL = "http://" + p.Addr()
	// The floors' modes were set at 32 jobs at once; the slow processor's
	// modes run a worker at its defaults (slow.go).
	wcfg.Concurrency = 32
	s.worker = wcfg
	if s.w, err = worker.New(ctx, wcfg, logger); err != nil {
		return nil, err
	}
	return s, nil
}

// roundTrips counts the round trips to Postgres an API makes per request of
// each of sends (which must answer want), one request at a time: it builds
// another API whose connections go through a wire, warms it (its first
// statements are prepared, its tenant cached), and counts 200 of each.
func (s *stack) roundTrips(ctx context.Context, dbURL string, logger *slog.Logger, sends []func(apiURL string) (int, error), want []int) ([]float64, error) {
	w, wireURL, err := newWire(dbURL)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	url, stop, err := s.anotherAPI(ctx, logger, func(c *api.Config) { c.DatabaseURL = wireURL })
	if err != nil {
		return nil, err
	}
	defer stop()
	const warm, counted = 20, 200
	trips := make([]float64, len(sends))
	for i, send := range sends {
		for n := range warm + counted {
			if n == warm {
				w.trips.Store(0)
			}
			if status, err := send(url); err != nil || status != want[i] {
				return nil, fmt.Errorf("counting round trips: status %d, want %d: %v", status, want[i], err)
			}
		}
		trips[i] = float64(w.trips.Load()) / counted
	}
	return trips, nil
}

// anotherAPI starts an API configured as the stack's, then changed by
// change, and returns its URL and what stops it.
func (s *stack) anotherAPI(ctx context.Context, logger *slog.Logger, change func(*api.Config)) (string, func(), error) {
	cfg := s.api
	change(&cfg)
	a, err := api.New(ctx, cfg, logger)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	var once sync.Once
	return "http://" + a.Addr(), func() { once.Do(func() { cancel(); wg.Wait() }) }, nil
}

func (s *stack) startWorker(ctx context.Context) {
	s.workerRan = true
	ctx, s.workerCancel = context.WithCancel(ctx)
	s.workerDone = make(chan struct{})
	go func() { defer close(s.workerDone); _ = s.w.Run(ctx) }()
}

func (s *stack) stopWorker() {
	if s.workerCancel != nil {
		s.workerCancel()
		<-s.workerDone
		s.workerCancel = nil
	}
}

// drainStall is how long drain waits for the worker to settle one more
// payment before it gives up.
const drainStall = time.Minute

// drain waits until no payment is left processing. It gives up, with an
// error, only when none has been settled for drainStall: a long run's
// backlog (BENCH_DURATION) takes the worker minutes, and a mode measured
// over what is left of it would measure the backlog instead.
func (s *stack) drain(ctx context.Context, pool *pgxpool.Pool) error {
	if s.workerCancel == nil {
		return nil
	}
	return drainPayments(ctx, pool)
}

// drainPayments waits until no payment is left processing, as drain does,
// whichever worker settles them.
func drainPayments(ctx context.Context, pool *pgxpool.Pool) error {
	left, progressed := -1, time.Now()
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE status = 'processing'`).Scan(&n); err != nil {
			return err
		}
		switch {
		case n == 0:
			return nil
		case left < 0 || n < left:
			left, progressed = n, time.Now()
		case time.Since(progressed) > drainStall:
			return fmt.Errorf("the worker settled none of the %d payments left processing in %s", n, drainStall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *stack) stop() {
	s.stopWorker()
	if !s.workerRan {
		s.w.Close()
	}
	s.cancel()
	s.wg.Wait()
}
