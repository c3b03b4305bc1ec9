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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kelseyhightower/envconfig"

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
	send := client.post
	post := func(key, prefer string) (int, error) { return send(st.apiURL+"/v1/payments", key, prefer) }
	var seq atomic.Int64
	fresh := func(prefix string) string { return prefix + strconv.FormatInt(seq.Add(1), 10) }
	// The retention mode, last when the others run: it needs the worker
	// stopped, and leaves the table as a reaper run leaves it.
	retain := func() error {
		if cfg.RetentionKeys <= 0 {
			return nil
		}
		if err := st.drain(ctx, pool); err != nil {
			return err
		}
		r, err := retention(ctx, cfg, pool, st, func() (int, error) { return post(fresh("ret-new-"), "respond-async") }, out)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		report.Retention = &r
		return nil
	}
	if cfg.RetentionOnly {
		if err := retain(); err != nil {
			return err
		}
		PrintRetention(out, *report.Retention)
		return nil
	}

	results := []Result{insert, sel}
	var explained []Explained
	// expect is send as an op that fails on any status but want.
	expect := func(want int, send func() (int, error)) func() error {
		return func() error {
			status, err := send()
			if err == nil && status != want {
				err = fmt.Errorf("status %d, want %d", status, want)
			}
			return err
		}
	}
	// measured keeps a mode's result, and where its database's time went
	// when it is explained.
	measured := func(r Result) error {
		results = append(results, r)
		if explain(r.Mode) {
			top, err := stats.top(ctx, 8, r.Ops)
			if err != nil {
				return fmt.Errorf("%s: statement statistics: %w", r.Mode, err)
			}
			explained = append(explained, Explained{Mode: r.Mode, Statements: top})
		}
		return nil
	}
	// mode measures a mode against a result measured before it.
	mode := func(name string, clients int, ceiling Result, want int, send func() (int, error)) (Result, error) {
		stopProfile, err := startProfile(cfg.ProfileDir, name, 0)
		if err != nil {
			return Result{}, err
		}
		if err := stats.reset(ctx); err != nil {
			return Result{}, err
		}
		r, err := measure(ctx, name, clients, cfg.Duration, out, expect(want, send))
		stopProfile()
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		r.Ceiling, r.Ratio = ceiling.Mode, r.PerSecond/ceiling.PerSecond
		return r, measured(r)
	}
	report.CPU = map[string]CPU{}
	// cost keeps what a mode cost the processors, when they could be read.
	cost := func(mode string, use cpuUse, useErr error, ops int) {
		if useErr == nil {
			var c CPU
			if c, useErr = use.per(ops); useErr == nil {
				report.CPU[mode] = c
				return
			}
		}
		fmt.Fprintf(out, "bench: what %s cost the processors is not known here (%v)\n", mode, useErr)
	}
	// inTurns measures a mode in turns with its reference (alternate): the
	// modes a floor reads. Its profile is a file a turn, and what its
	// slices cost the processors is added up.
	inTurns := func(name string, ref reference, want int, send func() (int, error)) (Result, error) {
		if err := stats.reset(ctx); err != nil {
			return Result{}, err
		}
		var (
			use    cpuUse
			useErr error
		)
		r, against, err := alternate(ctx, name, cfg.Clients, cfg.Duration, out, ref, expect(want, send), func(i int) (func(), error) {
			stopProfile, err := startProfile(cfg.ProfileDir, name, i+1)
			if err != nil {
				return nil, err
			}
			meter := startCPU()
			return func() {
				slice, err := meter.stop()
				use.add(slice)
				useErr = cmp(useErr, err)
				stopProfile()
			}, nil
		})
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		cost(name, use, useErr, r.Ops)
		if err := measured(r); err != nil {
			return r, err
		}
		results = append(results, against)
		return r, nil
	}
	insertRef := reference{insert.Mode, insertRow(ctx, pool)}

	// What HTTP costs here: a bare handler that reads the request and runs
	// one statement, through the same client, is what no service can beat.
	bare, err := bareHandler(pool)
	if err != nil {
		return err
	}
	defer bare.Close()
	for _, b := range []struct {
		name, path string
		ceiling    Result
	}{{"reference: bare HTTP handler, one INSERT", "/insert", insert}, {bareSelectMode, "/select", sel}} {
		if _, err := mode(b.name, cfg.Clients, b.ceiling, http.StatusOK,
			func() (int, error) { return send(bare.URL+b.path, "", "") }); err != nil {
			return err
		}
	}
	bareSelect := reference{bareSelectMode, expect(http.StatusOK, func() (int, error) { return send(bare.URL+"/select", "", "") })}

	// The API's own path: the worker is not running, so nothing competes.
	// Both new-key modes start from a checkpoint, so that neither pays for
	// the other's (or the big table's) writes being flushed.
	checkpoint(ctx, pool, out)
	newKeys, err := inTurns(newKeysMode, insertRef, http.StatusAccepted,
		func() (int, error) { return post(fresh("new-"), "respond-async") })
	if err != nil {
		return err
	}
	// The same with the tenant limit on (never reached): what counting each
	// request in the database the replicas share costs.
	limitedURL, stopLimited, err := st.anotherAPI(ctx, logger, func(c *api.Config) { c.RateLimit, c.RateWindow = 1<<30, time.Second })
	if err != nil {
		return err
	}
	defer stopLimited()
	checkpoint(ctx, pool, out)
	if _, err := mode(limitedNewKeysMode, cfg.Clients, newKeys, http.StatusAccepted,
		func() (int, error) { return send(limitedURL+"/v1/payments", fresh("limited-"), "respond-async") }); err != nil {
		return err
	}
	st.startWorker(ctx)
	// The worker drains what the first modes queued before anything else is
	// measured.
	if err := st.drain(ctx, pool); err != nil {
		return err
	}
	// Finished keys to replay, one per client, made end to end.
	replayKeys := make([]string, cfg.Clients)
	for i := range replayKeys {
		replayKeys[i] = fresh("replay-")
		if status, err := post(replayKeys[i], "wait=10"); err != nil || status != http.StatusCreated {
			return fmt.Errorf("make a key to replay: %d, %v", status, err)
		}
	}
	var next atomic.Int64
	replay := func(url string) (int, error) {
		return send(url+"/v1/payments", replayKeys[next.Add(1)%int64(len(replayKeys))], "")
	}
	replays, err := inTurns(replaysMode, bareSelect, http.StatusCreated, func() (int, error) { return replay(st.apiURL) })
	if err != nil {
		return err
	}
	if _, err := mode(limitedReplaysMode, cfg.Clients, replays, http.StatusCreated, func() (int, error) { return replay(limitedURL) }); err != nil {
		return err
	}
	// Its connections go back, for the next API's: a stock Postgres allows
	// 100.
	stopLimited()
	// The round trips of the explained modes, counted on the wire by an
	// API of their own, one request at a time.
	trips, err := st.roundTrips(ctx, cfg.DatabaseURL, logger, []func(string) (int, error){
		func(url string) (int, error) { return send(url+"/v1/payments", fresh("trips-"), "respond-async") },
		replay,
	}, []int{http.StatusAccepted, http.StatusCreated})
	if err != nil {
		return err
	}
	for i := range explained {
		explained[i].RoundTrips = trips[i]
	}
	// Each end-to-end mode measures payments, not what the modes before it
	// left behind (vacuum).
	vacuum(ctx, pool, out)
	if _, err := inTurns(endToEndMode, insertRef, http.StatusCreated,
		func() (int, error) { return post(fresh("e2e-"), "wait=10") }); err != nil {
		return err
	}
	vacuum(ctx, pool, out)
	tl := newTimeline()
	stopListening, err := tl.listen(ctx, pool, logger)
	if err != nil {
		return err
	}
	meter := startCPU()
	four, err := mode(endToEnd4Mode, 4, insert, http.StatusCreated, func() (int, error) {
		return tl.send(fresh("e2e4-"), func(key string) (int, error) { return post(key, "wait=10") })
	})
	stopListening()
	if err != nil {
		return err
	}
	use, err := meter.stop()
	cost(endToEnd4Mode, use, err, four.Ops)
	if report.Hops, err = hops(ctx, pool, "e2e4-"); err != nil {
		return fmt.Errorf("where the payments' time went: %w", err)
	}
	if report.ClientHops, err = tl.hops(ctx, pool, "e2e4-"); err != nil {
		return fmt.Errorf("where the payments' time went, by the client: %w", err)
	}
	if cfg.BigTable > 0 {
		st.stopWorker()
		if err := st.drain(ctx, pool); err != nil {
			return err
		}
		fmt.Fprintf(out, "bench: putting %d finished keys in the table\n", cfg.BigTable)
		if err := bigTable(ctx, pool, cfg.BigTable); err != nil {
			return err
		}
		checkpoint(ctx, pool, out)
		if _, err := inTurns(fmt.Sprintf(bigTableMode, cfg.BigTable), insertRef, http.StatusAccepted,
			func() (int, error) { return post(fresh("big-"), "respond-async") }); err != nil {
			return err
		}
	}
	if err := retain(); err != nil {
		return err
	}
	Print(out, results)
	PrintExplained(out, explained)
	PrintHops(out, endToEnd4Mode, report.Hops)
	PrintClientHops(out, endToEnd4Mode, report.ClientHops)
	for _, r := range results {
		if c, ok := report.CPU[r.Mode]; ok {
			PrintCPU(out, r.Mode, c)
		}
	}
	if report.Retention != nil {
		PrintRetention(out, *report.Retention)
	}
	hwm, err := peakRSS()
	if err == nil {
		fmt.Fprintf(out, "bench: peak RSS of this process (API, worker, processor and load generator together): %d MB\n", hwm>>20)
	}
	report.Results, report.Explained, report.Floors = results, explained, Floors(results, hwm)
	PrintFloors(out, report.Floors)
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

// startProfile starts a CPU profile of the mode name in dir, when dir is
// set, and returns what stops it. A mode measured in turns has a file a
// turn (turn 1 on, name.1.pprof and so on; go tool pprof merges them).
func startProfile(dir, name string, turn int) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	slug := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '-'
	}, name)
	// The directory is made if missing: a run that measured for minutes
	// must not fail at its first profile.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if turn > 0 {
		slug += "." + strconv.Itoa(turn)
	}
	f, err := os.Create(filepath.Join(dir, slug+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// peakRSS reads the process's peak resident set size (VmHWM) from Linux's
// /proc, in bytes.
func peakRSS() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// ceilings measures one-row inserts and point selects through pgx.
func ceilings(ctx context.Context, pool *pgxpool.Pool, cfg Config, out io.Writer) (Result, Result, error) {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_ceiling (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text NOT NULL)`); err != nil {
		return Result{}, Result{}, err
	}
	insert, err := measure(ctx, "ceiling: one-row INSERT (pgx)", cfg.Clients, cfg.Duration, out, insertRow(ctx, pool))
	if err != nil {
		return Result{}, Result{}, err
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM bench_ceiling`).Scan(&n); err != nil {
		return Result{}, Result{}, err
	}
	var i atomic.Int64
	sel, err := measure(ctx, "ceiling: point SELECT (pgx)", cfg.Clients, cfg.Duration, out, func() error {
		var v string
		return pool.QueryRow(ctx, `SELECT v FROM bench_ceiling WHERE id = $1`, 1+i.Add(1)%n).Scan(&v)
	})
	return insert, sel, err
}

// insertRow is the insert ceiling's op: one row, one statement.
func insertRow(ctx context.Context, pool *pgxpool.Pool) func() error {
	return func() error {
		_, err := pool.Exec(ctx, `INSERT INTO bench_ceiling (v) VALUES ('x')`)
		return err
	}
}

// bareHandler serves the two reference handlers: POST /insert reads the
// body and inserts a row, POST /select reads the body and selects one.
func bareHandler(pool *pgxpool.Pool) (*httptest.Server, error) {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT max(id) FROM bench_ceiling`).Scan(&n); err != nil {
		return nil, err
	}
	var i atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /insert", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if _, err := pool.Exec(r.Context(), `INSERT INTO bench_ceiling (v) VALUES ('x')`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("POST /select", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var v string
		if err := pool.QueryRow(r.Context(), `SELECT v FROM bench_ceiling WHERE id = $1`, 1+i.Add(1)%n).Scan(&v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	return httptest.NewServer(mux), nil
}

// measure runs op from clients goroutines for d and reports the rate and
// the latency percentiles, with a progress line every two seconds.
func measure(ctx context.Context, name string, clients int, d time.Duration, out io.Writer, op func() error) (Result, error) {
	var s sample
	err := s.run(ctx, clients, d, op, func(done int64, elapsed time.Duration) {
		fmt.Fprintf(out, "bench %-45s %5.1fs  %8.0f/s\n", name, elapsed.Seconds(), float64(done)/elapsed.Seconds())
	})
	return s.result(name, clients), err
}

// turns is how many slices a mode measured against a reference takes, and
// as many the reference (alternate).
const turns = 5

// reference is what a mode is measured against in turns with it: a ceiling
// or a bare handler, run as the mode runs.
type reference struct {
	mode string
	op   func() error
}

// alternate measures op and ref's op in turns, from clients goroutines,
// each for d in all, in slices of d/turns: the reference first in odd turns
// and second in even ones, so that a machine that slows down or speeds up
// while they run weighs on both alike, as it does not when a ceiling
// measured minutes earlier is the divisor. slice(i) is called around each of
// op's slices (its profile). The mode's result is a ratio to the
// reference's, which is returned too.
func alternate(ctx context.Context, name string, clients int, d time.Duration, out io.Writer, ref reference, op func() error,
	slice func(i int) (func(), error)) (Result, Result, error) {
	var mine, theirs sample
	part := d / turns
	for i := range turns {
		runs := []func() error{
			func() error { return theirs.run(ctx, clients, part, ref.op, nil) },
			func() error {
				stop, err := slice(i)
				if err != nil {
					return err
				}
				defer stop()
				return mine.run(ctx, clients, part, op, nil)
			},
		}
		if i%2 == 1 {
			slices.Reverse(runs)
		}
		for _, run := range runs {
			if err := run(); err != nil {
				return Result{}, Result{}, err
			}
		}
		fmt.Fprintf(out, "bench %-45s %d/%d  %8.0f/s, its reference %8.0f/s\n", name, i+1, turns, mine.rate(), theirs.rate())
	}
	r, against := mine.result(name, clients), theirs.result(ref.mode+", in turns", clients)
	r.Ceiling, r.Ratio = against.Mode, r.PerSecond/against.PerSecond
	return r, against, nil
}

// sample is what one or more runs of an operation measured.
type sample struct {
	latencies []time.Duration
	elapsed   time.Duration
	err       error
}

// run runs op from clients goroutines for d, adding what it measures to s,
// and calls tick, when set, every two seconds with how many ops are done.
// It returns the first error an op returned before d ended.
func (s *sample) run(ctx context.Context, clients int, d time.Duration, op func() error, tick func(done int64, elapsed time.Duration)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu   sync.Mutex
		done atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				if err := op(); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						s.err = cmp(s.err, err)
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, time.Since(t))
				done.Add(1)
			}
			mu.Lock()
			s.latencies = append(s.latencies, mine...)
			mu.Unlock()
		})
	}
	if tick != nil {
		t := time.NewTicker(2 * time.Second)
		for loop := true; loop; {
			select {
			case <-ctx.Done():
				loop = false
			case <-t.C:
				tick(done.Load(), time.Since(start))
			}
		}
		t.Stop()
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	return s.err
}

// rate is ops a second so far.
func (s *sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.latencies)) / s.elapsed.Seconds()
}

// result is the rate and the latency percentiles of all s measured.
func (s *sample) result(name string, clients int) Result {
	r := Result{Mode: name, Clients: clients, Ops: len(s.latencies), PerSecond: s.rate()}
	r.P50, r.P90, r.P99 = percentiles(s.latencies)
	return r
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// bigTable inserts n finished keys, as months of traffic leave them.
func bigTable(ctx context.Context, pool *pgxpool.Pool, n int) error {
	_, err := pool.Exec(ctx, `
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	response_status, response_headers, response_body, created_at, updated_at, finished_at, expires_at)
SELECT 'ten_globex', 'old-' || i, 'POST', '/v1/payments', sha256(i::text::bytea), 'finished',
	201, '{"Content-Type": "application/json"}', '{}'::bytea, now(), now(), now(), now() + interval '1 day'
FROM generate_series(1, $1) i`, n)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE idempotency_keys`)
	return err
}

// vacuum vacuums and analyzes the whole database, then checkpoints, so
// that a mode does not pay for what the modes before it left: the new-key
// modes queue tens of thousands of jobs with the worker stopped, and once the
// worker has drained them the job queue's indexes hold their dead entries
// until a vacuum, which autovacuum starts a minute apart at most. River's
// fetch read 364 buffers a call just after such a drain, 25 after a VACUUM.
// It needs the table owners' rights (the bench's own database: it made
// them); without them the run goes on, and says so.
func vacuum(ctx context.Context, pool *pgxpool.Pool, out io.Writer) {
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		fmt.Fprintf(out, "bench: no vacuum before the mode (%v); its figure includes what earlier modes left\n", err)
	}
	checkpoint(ctx, pool, out)
}

// checkpoint flushes what earlier writes left dirty. It needs the
// pg_checkpoint role (or a superuser); without it the run goes on, and says so.
func checkpoint(ctx context.Context, pool *pgxpool.Pool, out io.Writer) {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		fmt.Fprintf(out, "bench: no checkpoint before the mode (%v); its figure includes earlier writes\n", err)
	}
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
		if err := envconfig.Process("payments_bench_unset", c); err != nil {
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
	a, err := api.New(ctx, acfg, logger)
	if err != nil {
		return nil, err
	}
	s.wg.Go(func() { _ = a.Run(ctx) })
	s.apiURL, s.api = "http://"+a.Addr(), acfg
	wcfg.DatabaseURL, wcfg.MetricsAddr, wcfg.ProcessorURL = dbURL, "127.0.0.1:0", "http://"+p.Addr()
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
