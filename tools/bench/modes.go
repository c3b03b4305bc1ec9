package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/process/api"
)

// How a run goes through its modes, in order: each measured against a
// ceiling measured before it or in turns with its reference, its result and
// where its time went kept for the report.

// runner is a run under way: the service, what loads it, and the modes
// measured so far.
type runner struct {
	ctx    context.Context
	cfg    Config
	out    io.Writer
	pool   *pgxpool.Pool
	stats  statStatements
	st     *stack
	logger *slog.Logger
	// send posts a payment to url under key with the Prefer header prefer.
	send func(url, key, prefer string) (int, error)
	seq  atomic.Int64

	report    *Report
	results   []Result
	explained []Explained
	// hwm is the process's peak RSS before the slow processor's modes.
	hwm int64
}

// post posts a payment to the stack's API.
func (r *runner) post(key, prefer string) (int, error) {
	return r.send(r.st.apiURL+"/v1/payments", key, prefer)
}

// fresh is a key never used before in the run.
func (r *runner) fresh(prefix string) string { return prefix + strconv.FormatInt(r.seq.Add(1), 10) }

// retain runs the retention mode, when asked for: last when the others run,
// since it needs the worker stopped, and leaves the table as a reaper run
// leaves it.
func (r *runner) retain() error {
	if r.cfg.RetentionKeys <= 0 {
		return nil
	}
	if err := r.st.drain(r.ctx, r.pool); err != nil {
		return err
	}
	ret, err := retention(r.ctx, r.cfg, r.pool, r.st, func() (int, error) { return r.post(r.fresh("ret-new-"), "respond-async") }, r.out)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	r.report.Retention = &ret
	return nil
}

// expect is send as an op that fails on any status but want.
func expect(want int, send func() (int, error)) func() error {
	return func() error {
		status, err := send()
		if err == nil && status != want {
			err = fmt.Errorf("status %d, want %d", status, want)
		}
		return err
	}
}

// measured keeps a mode's result, and where its database's time went when
// it is explained.
func (r *runner) measured(res Result) error {
	r.results = append(r.results, res)
	if explain(res.Mode) {
		top, err := r.stats.top(r.ctx, 8, res.Ops)
		if err != nil {
			return fmt.Errorf("%s: statement statistics: %w", res.Mode, err)
		}
		r.explained = append(r.explained, Explained{Mode: res.Mode, Statements: top})
	}
	return nil
}

// mode measures a mode against a result measured before it.
func (r *runner) mode(name string, clients int, ceiling Result, want int, send func() (int, error)) (Result, error) {
	stopProfile, err := startProfile(r.cfg.ProfileDir, name, 0)
	if err != nil {
		return Result{}, err
	}
	if err := r.stats.reset(r.ctx); err != nil {
		return Result{}, err
	}
	res, err := measure(r.ctx, name, clients, r.cfg.Duration, r.out, expect(want, send))
	stopProfile()
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	res.Ceiling, res.Ratio = ceiling.Mode, res.PerSecond/ceiling.PerSecond
	return res, r.measured(res)
}

// cost keeps what a mode cost the processors, when they could be read.
func (r *runner) cost(mode string, use cpuUse, useErr error, ops int) {
	if useErr == nil {
		var c CPU
		if c, useErr = use.per(ops); useErr == nil {
			r.report.CPU[mode] = c
			return
		}
	}
	fmt.Fprintf(r.out, "bench: what %s cost the processors is not known here (%v)\n", mode, useErr)
}

// inTurns measures a mode in turns with its reference (alternate): the
// modes a floor reads. Its profile is a file a turn, and what its slices
// cost the processors is added up.
func (r *runner) inTurns(name string, ref reference, want int, send func() (int, error)) (Result, error) {
	if err := r.stats.reset(r.ctx); err != nil {
		return Result{}, err
	}
	var (
		use    cpuUse
		useErr error
	)
	res, against, err := alternate(r.ctx, name, r.cfg.Clients, r.cfg.Duration, r.out, ref, expect(want, send), func(i int) (func(), error) {
		stopProfile, err := startProfile(r.cfg.ProfileDir, name, i+1)
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
		return res, fmt.Errorf("%s: %w", name, err)
	}
	r.cost(name, use, useErr, res.Ops)
	if err := r.measured(res); err != nil {
		return res, err
	}
	r.results = append(r.results, against)
	return res, nil
}

// bareModes measures what HTTP costs here: a bare handler that reads the
// request and runs one statement, through the same client, is what no
// service can beat. It returns the handler, for the caller to close, and the
// bare select as a reference.
func (r *runner) bareModes(insert, sel Result) (*httptest.Server, reference, error) {
	bare, err := bareHandler(r.pool)
	if err != nil {
		return nil, reference{}, err
	}
	for _, b := range []struct {
		name, path string
		ceiling    Result
	}{{"reference: bare HTTP handler, one INSERT", "/insert", insert}, {bareSelectMode, "/select", sel}} {
		if _, err := r.mode(b.name, r.cfg.Clients, b.ceiling, http.StatusOK,
			func() (int, error) { return r.send(bare.URL+b.path, "", "") }); err != nil {
			bare.Close()
			return nil, reference{}, err
		}
	}
	return bare, reference{bareSelectMode, expect(http.StatusOK, func() (int, error) { return r.send(bare.URL+"/select", "", "") })}, nil
}

// apiModes measures the API's two paths, new keys and replays, each with
// the tenant limit on too, and counts their round trips.
func (r *runner) apiModes(insertRef, bareSelect reference) error {
	ctx, st := r.ctx, r.st
	// The API's own path: the worker is not running, so nothing competes.
	// Both new-key modes start from a checkpoint, so that neither pays for
	// the other's (or the big table's) writes being flushed.
	checkpoint(ctx, r.pool, r.out)
	newKeys, err := r.inTurns(newKeysMode, insertRef, http.StatusAccepted,
		func() (int, error) { return r.post(r.fresh("new-"), "respond-async") })
	if err != nil {
		return err
	}
	// The same with the tenant limit on (never reached): what counting each
	// request in the database the replicas share costs.
	limitedURL, stopLimited, err := st.anotherAPI(ctx, r.logger, func(c *api.Config) { c.RateLimit, c.RateWindow = 1<<30, time.Second })
	if err != nil {
		return err
	}
	defer stopLimited()
	checkpoint(ctx, r.pool, r.out)
	if _, err := r.mode(limitedNewKeysMode, r.cfg.Clients, newKeys, http.StatusAccepted,
		func() (int, error) { return r.send(limitedURL+"/v1/payments", r.fresh("limited-"), "respond-async") }); err != nil {
		return err
	}
	st.startWorker(ctx)
	// The worker drains what the first modes queued before anything else is
	// measured.
	if err := st.drain(ctx, r.pool); err != nil {
		return err
	}
	// Finished keys to replay, one per client, made end to end.
	replayKeys := make([]string, r.cfg.Clients)
	for i := range replayKeys {
		replayKeys[i] = r.fresh("replay-")
		if status, err := r.post(replayKeys[i], "wait=10"); err != nil || status != http.StatusCreated {
			return fmt.Errorf("make a key to replay: %d, %v", status, err)
		}
	}
	var next atomic.Int64
	replay := func(url string) (int, error) {
		return r.send(url+"/v1/payments", replayKeys[next.Add(1)%int64(len(replayKeys))], "")
	}
	replays, err := r.inTurns(replaysMode, bareSelect, http.StatusCreated, func() (int, error) { return replay(st.apiURL) })
	if err != nil {
		return err
	}
	if _, err := r.mode(limitedReplaysMode, r.cfg.Clients, replays, http.StatusCreated, func() (int, error) { return replay(limitedURL) }); err != nil {
		return err
	}
	// Its connections go back, for the next API's: a stock Postgres allows
	// 100.
	stopLimited()
	// The round trips of the explained modes, counted on the wire by an
	// API of their own, one request at a time.
	trips, err := st.roundTrips(ctx, r.cfg.DatabaseURL, r.logger, []func(string) (int, error){
		func(url string) (int, error) { return r.send(url+"/v1/payments", r.fresh("trips-"), "respond-async") },
		replay,
	}, []int{http.StatusAccepted, http.StatusCreated})
	if err != nil {
		return err
	}
	for i := range r.explained {
		r.explained[i].RoundTrips = trips[i]
	}
	return nil
}

// endToEndModes measures payments waited for end to end (API, worker,
// processor), in turns with the insert ceiling, then at 4 clients for
// latency, with where their time went.
func (r *runner) endToEndModes(insertRef reference, insert Result) error {
	ctx, pool, report := r.ctx, r.pool, r.report
	// Each end-to-end mode measures payments, not what the modes before it
	// left behind (vacuum).
	vacuum(ctx, pool, r.out)
	if _, err := r.inTurns(endToEndMode, insertRef, http.StatusCreated,
		func() (int, error) { return r.post(r.fresh("e2e-"), "wait=10") }); err != nil {
		return err
	}
	vacuum(ctx, pool, r.out)
	tl := newTimeline()
	stopListening, err := tl.listen(ctx, pool, r.logger)
	if err != nil {
		return err
	}
	meter := startCPU()
	four, err := r.mode(endToEnd4Mode, 4, insert, http.StatusCreated, func() (int, error) {
		return tl.send(r.fresh("e2e4-"), func(key string) (int, error) { return r.post(key, "wait=10") })
	})
	stopListening()
	if err != nil {
		return err
	}
	use, err := meter.stop()
	r.cost(endToEnd4Mode, use, err, four.Ops)
	if report.Hops, err = hops(ctx, pool, "e2e4-"); err != nil {
		return fmt.Errorf("where the payments' time went: %w", err)
	}
	if report.ClientHops, err = tl.hops(ctx, pool, "e2e4-"); err != nil {
		return fmt.Errorf("where the payments' time went, by the client: %w", err)
	}
	return nil
}

// bigTableMode measures new keys again with BigTable finished keys in the
// table, the worker stopped.
func (r *runner) bigTableMode(insertRef reference) error {
	r.st.stopWorker()
	if err := r.st.drain(r.ctx, r.pool); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "bench: putting %d finished keys in the table\n", r.cfg.BigTable)
	if err := bigTable(r.ctx, r.pool, r.cfg.BigTable); err != nil {
		return err
	}
	checkpoint(r.ctx, r.pool, r.out)
	_, err := r.inTurns(fmt.Sprintf(bigTableMode, r.cfg.BigTable), insertRef, http.StatusAccepted,
		func() (int, error) { return r.post(r.fresh("big-"), "respond-async") })
	return err
}

// print writes the results, where the time went, what the modes cost, and
// the floors, and keeps them in the report.
func (r *runner) print() {
	out, report := r.out, r.report
	Print(out, r.results)
	PrintExplained(out, r.explained)
	PrintHops(out, endToEnd4Mode, report.Hops)
	PrintClientHops(out, endToEnd4Mode, report.ClientHops)
	for _, res := range r.results {
		if c, ok := report.CPU[res.Mode]; ok {
			PrintCPU(out, res.Mode, c)
		}
	}
	if report.Retention != nil {
		PrintRetention(out, *report.Retention)
	}
	if r.hwm > 0 {
		fmt.Fprintf(out, "bench: peak RSS of this process (API, worker, processor and load generator together): %d MB at %d clients", r.hwm>>20, r.cfg.Clients)
		if hwm, err := peakRSS(); err == nil {
			fmt.Fprintf(out, ", %d MB after the slow processor's modes (%d clients, two more workers and processors)", hwm>>20, slowClients)
		}
		fmt.Fprintln(out)
	}
	report.Results, report.Explained, report.Floors = r.results, r.explained, Floors(r.results, r.hwm)
	PrintFloors(out, report.Floors)
}
