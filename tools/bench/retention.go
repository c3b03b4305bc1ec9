package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/timer"
	"github.com/example/payments/internal/webhooks"
)

// The retention mode: keys expiring while the service runs. It puts
// RetentionKeys finished keys past their retention in the table, and as many
// tombstones past theirs, each with its payment (the reaper's steady state:
// every key it ever sees costs it one expiry, a day after it finished, and
// one delete, a tombstone retention later). Then, for RetentionDuration, it
// sends new keys (the "new keys, async, worker stopped" request) in slices
// of Duration, the reaper off in one and on in the next. In each slice on,
// the worker's reap job (jobs.ReapWorker, at the worker's pace or at
// RetentionPace) runs on a pool of its own with the slice's end as its
// deadline, as River gives a run JOB_TIMEOUT. The slices without the reaper
// are the baseline, interleaved with the others so that whatever else the
// machine does weighs on both alike. It reports the p99 with the reaper as
// a ratio to the baseline's, what the reaper reaped a second under that
// load, whether it keeps pace, the WAL it wrote, and what one batch costs,
// under the load and alone.

// RetentionResult is the retention mode measured.
type RetentionResult struct {
	// Keys is how many finished keys past their retention, and how many
	// tombstones past theirs, were put in the table.
	Keys int
	// Batch, JobTimeout and Interval are the worker's REAP_BATCH,
	// JOB_TIMEOUT and REAP_INTERVAL.
	Batch      int
	JobTimeout time.Duration
	Interval   time.Duration
	// Slice is how long the reaper ran, or rested, at a time.
	Slice time.Duration
	// Baseline is new keys in the slices without the reaper; Reaping in
	// the slices with it. Reaping's Ratio is its rate over Baseline's.
	Baseline, Reaping Result
	// P99Ratio is Reaping.P99 / Baseline.P99: the goal is at most 1.2.
	P99Ratio float64
	// Expire and Delete are the reaper's two stages under the load; the
	// Alone ones the same on a small set with nothing else running.
	Expire, Delete           Stage
	AloneExpire, AloneDelete Stage
	// CaughtUp is whether the reaper reaped every expired key and tombstone
	// within the window.
	CaughtUp bool
	// LeftExpired and LeftTombstones are what was left to reap at the end.
	LeftExpired, LeftTombstones int
	// Pace is the reaper's pace: the worker's (REAP_BATCH, REAP_BATCH_TIME,
	// REAP_REST) or the one asked for.
	Pace idempotency.ReapPace
	// BaselineWAL and ReapingWAL are the WAL the server wrote a second in
	// the slices without and with the reaper, in bytes; the Checkpoints
	// the checkpoints begun in them. From pg_stat_wal and pg_stat_bgwriter:
	// the whole server's, whatever else runs on it.
	BaselineWAL, ReapingWAL                 float64
	BaselineCheckpoints, ReapingCheckpoints int64
	// ReapingTime is the time measured in the slices with the reaper.
	ReapingTime time.Duration
	// BaselineErrors and ReapingErrors are the requests that failed (a
	// shared server out of connections answers 503), left out of the
	// figures; the mode fails past 1% of either.
	BaselineErrors, ReapingErrors int
}

// Stage is one of the reaper's statements, a batch of REAP_BATCH rows at a
// time: the batches that reaped something (the one that finds nothing left
// is not counted).
type Stage struct {
	Rows    int
	Batches int
	// Sum is the time spent in the batches, round trips included, and
	// Rested the pauses after them (REAP_REST).
	P50, P99, Max, Sum time.Duration
	Rested             time.Duration
}

// PerSecond is rows reaped a second of the stage's time, its batches and
// the pauses after them.
func (s Stage) PerSecond() float64 {
	if s.Sum+s.Rested <= 0 {
		return 0
	}
	return float64(s.Rows) / (s.Sum + s.Rested).Seconds()
}

// Mean is the mean time of one batch.
func (s Stage) Mean() time.Duration {
	if s.Batches == 0 {
		return 0
	}
	return s.Sum / time.Duration(s.Batches)
}

// Capacity is the keys a second the reaper can take in under this load: each
// key costs it one expiry and, later, one delete.
func (r RetentionResult) Capacity() float64 {
	e, d := r.Expire.PerSecond(), r.Delete.PerSecond()
	if e <= 0 || d <= 0 {
		return 0
	}
	return 1 / (1/e + 1/d)
}

// Scheduled is Capacity as the worker schedules the reaper: one run every
// REAP_INTERVAL, each cut off at JOB_TIMEOUT.
func (r RetentionResult) Scheduled() float64 {
	if r.Interval <= 0 {
		return 0
	}
	return r.Capacity() * min(1, r.JobTimeout.Seconds()/r.Interval.Seconds())
}

// WALPerKey is the WAL the reaper wrote a key (an expiry and a delete), in
// bytes: the server's WAL a second with the reaper less without, over the
// keys it reaped a second in the slices with it.
func (r RetentionResult) WALPerKey() float64 {
	if r.ReapingTime <= 0 || r.Expire.Rows+r.Delete.Rows == 0 {
		return 0
	}
	return (r.ReapingWAL - r.BaselineWAL) / (float64(r.Expire.Rows+r.Delete.Rows) / 2 / r.ReapingTime.Seconds())
}

// KeptPace reports whether the reaper, as scheduled, reaps keys at least as
// fast as the service created them under the same load.
func (r RetentionResult) KeptPace() bool { return r.Scheduled() >= r.Reaping.PerSecond }

const (
	retentionBaselineMode = "new keys, async, no reaper"
	retentionReapingMode  = "new keys, async, reaper running"
	// aloneBatches bounds the set reaped with nothing else running.
	aloneBatches = 50
)

// retention runs the retention mode on st, whose worker it stops, sending
// new keys through post.
func retention(ctx context.Context, cfg Config, pool *pgxpool.Pool, st *stack, post func() (int, error), out io.Writer) (RetentionResult, error) {
	r := RetentionResult{Keys: cfg.RetentionKeys, Batch: st.worker.ReapBatch, JobTimeout: st.worker.JobTimeout, Interval: st.worker.ReapInterval,
		Slice: cfg.Duration}
	d := cfg.RetentionDuration
	if d <= 0 {
		d = 2 * cfg.Duration
	}
	st.stopWorker()
	fmt.Fprintf(out, "bench: putting %d expired finished keys and %d expired tombstones, each with its payment, in the table\n", r.Keys, r.Keys)
	if err := expiredKeys(ctx, pool, "ret-", r.Keys); err != nil {
		return r, err
	}
	reaper, err := newReaper(ctx, cfg, st)
	if err != nil {
		return r, err
	}
	defer reaper.close()
	r.Pace = reaper.job.Pace
	checkpoint(ctx, pool, out)

	s, err := measureSliced(ctx, pool, cfg.Clients, d, r.Slice, reaper.slice, out, func() error {
		status, err := post()
		if err == nil && status != http.StatusAccepted {
			err = fmt.Errorf("status %d, want %d", status, http.StatusAccepted)
		}
		return err
	})
	r.CaughtUp = s.caughtUp
	if err != nil {
		return r, err
	}
	r.Baseline, r.Reaping = s.off, s.on
	r.BaselineWAL, r.ReapingWAL, r.BaselineCheckpoints, r.ReapingCheckpoints = s.offWAL, s.onWAL, s.offCheckpoints, s.onCheckpoints
	r.BaselineErrors, r.ReapingErrors, r.ReapingTime = s.offErrors, s.onErrors, s.onTime
	r.Expire, r.Delete = reaper.timer.stages(reaper.pause())
	r.Reaping.Ceiling, r.Reaping.Ratio = retentionBaselineMode, r.Reaping.PerSecond/r.Baseline.PerSecond
	if r.Baseline.P99 > 0 {
		r.P99Ratio = float64(r.Reaping.P99) / float64(r.Baseline.P99)
	}
	if err := pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE recovery_point = 'finished'), count(*) FILTER (WHERE recovery_point = 'expired')
FROM idempotency_keys WHERE recovery_point IN ('finished', 'expired') AND expires_at < now()`).Scan(&r.LeftExpired, &r.LeftTombstones); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "bench: retention window over: p99 %s without the reaper, %s with it (%.2f); reaped %d expired keys and %d tombstones, %d and %d left; now the rest, and a batch's cost alone\n",
		r.Baseline.P99.Round(10*time.Microsecond), r.Reaping.P99.Round(10*time.Microsecond), r.P99Ratio, r.Expire.Rows, r.Delete.Rows, r.LeftExpired, r.LeftTombstones)

	// What a batch costs with nothing else running: the rest of the keys,
	// then a small set of its own, reaped alone.
	if err := reaper.reap(ctx); err != nil {
		return r, err
	}
	alone := min(r.Keys, aloneBatches*r.Batch)
	if err := expiredKeys(ctx, pool, "ret-alone-", alone); err != nil {
		return r, err
	}
	checkpoint(ctx, pool, out)
	reaper.timer.reset()
	if err := reaper.reap(ctx); err != nil {
		return r, err
	}
	r.AloneExpire, r.AloneDelete = reaper.timer.stages(reaper.pause())
	return r, nil
}

// sliced is new keys measured in slices, with the reaper and without.
type sliced struct {
	caughtUp                      bool
	off, on                       Result
	offWAL, onWAL                 float64
	offCheckpoints, onCheckpoints int64
	offErrors, onErrors           int
	onTime                        time.Duration
}

// measureSliced runs op from clients goroutines for d, in slices, the
// first off and the next on, and so on, and measures the slices of each
// kind apart. In each slice on it runs reap, with the slice's end as its
// context's deadline, and waits for it at the end of the slice; once reap
// reports that it found nothing left to reap, the window ends with that
// slice. A request counts in the slice it starts in; those that start in the
// first tenth of a slice (at most half a second), while the reaper starts or
// stops, count in neither kind.
func measureSliced(ctx context.Context, pool *pgxpool.Pool, clients int, d, slice time.Duration, reap func(context.Context) bool, out io.Writer, op func() error) (sliced, error) {
	var s sliced
	settle := min(slice/10, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var (
		l  slicedLoad
		wg sync.WaitGroup
	)
	for range clients {
		wg.Go(func() { l.client(ctx, op) })
	}
	var offTime, onTime time.Duration
	for i := 0; ctx.Err() == nil; i++ {
		reaping := i%2 == 1
		l.state.Store(sliceSettling)
		sliceStart := time.Now()
		var reaper sync.WaitGroup
		stopReaping := func() {}
		if reaping {
			var reapCtx context.Context
			reapCtx, stopReaping = context.WithDeadline(ctx, sliceStart.Add(slice))
			reaper.Go(func() {
				if reap(reapCtx) {
					s.caughtUp = true
				}
			})
		}
		_ = timer.Sleep(ctx, settle)
		wal0, cp0 := walWritten(ctx, pool)
		counted := time.Now()
		what := "off"
		if reaping {
			l.state.Store(sliceOn)
			what = "on"
		} else {
			l.state.Store(sliceOff)
		}
		untilSliceEnds(ctx, sliceStart.Add(slice), func() {
			fmt.Fprintf(out, "bench retention, reaper %-3s %32s %5.1fs  %8.0f/s\n", what, "", time.Since(start).Seconds(), float64(l.done.Load())/time.Since(start).Seconds())
		})
		l.state.Store(sliceSettling)
		took := time.Since(counted)
		reaper.Wait()
		stopReaping()
		wal1, cp1 := walWritten(context.WithoutCancel(ctx), pool)
		if reaping {
			onTime += took
			s.onWAL += float64(wal1 - wal0)
			s.onCheckpoints += cp1 - cp0
		} else {
			offTime += took
			s.offWAL += float64(wal1 - wal0)
			s.offCheckpoints += cp1 - cp0
		}
		if s.caughtUp {
			cancel()
		}
	}
	wg.Wait()
	if onTime > 0 {
		s.onWAL /= onTime.Seconds()
	}
	if offTime > 0 {
		s.offWAL /= offTime.Seconds()
	}
	s.off, s.on = l.result(retentionBaselineMode, false, clients, offTime), l.result(retentionReapingMode, true, clients, onTime)
	s.offErrors, s.onErrors, s.onTime = l.failed[sliceOff], l.failed[sliceOn], onTime
	switch {
	case s.off.Ops == 0 || s.on.Ops == 0:
		return s, fmt.Errorf("%d requests without the reaper and %d with it: a window of %s in slices of %s is too short (%v)", s.off.Ops, s.on.Ops, d, slice, l.firstErr)
	case s.offErrors*100 > s.off.Ops || s.onErrors*100 > s.on.Ops:
		return s, fmt.Errorf("%d of %d requests without the reaper and %d of %d with it failed: %w", s.offErrors, s.off.Ops, s.onErrors, s.on.Ops, l.firstErr)
	}
	return s, nil
}

// What a request of measureSliced counts in, by the slice it starts in:
// settling (in neither kind), off or on.
const (
	sliceSettling = iota
	sliceOff
	sliceOn
)

// slicedLoad is the requests of measureSliced.
type slicedLoad struct {
	// state is what a request starting now counts in.
	state    atomic.Int32
	done     atomic.Int64
	mu       sync.Mutex
	samples  []slicedSample
	firstErr error
	failed   [3]int // by state
}

// slicedSample is one request that counted.
type slicedSample struct {
	on   bool
	took time.Duration
}

// client runs op until ctx ends, counting each request in the kind of slice
// it started in.
func (l *slicedLoad) client(ctx context.Context, op func() error) {
	var mine []slicedSample
	for ctx.Err() == nil {
		counts := l.state.Load()
		t := time.Now()
		if err := op(); err != nil {
			if ctx.Err() == nil {
				l.mu.Lock()
				l.firstErr = cmp(l.firstErr, err)
				l.failed[counts]++
				l.mu.Unlock()
			}
			continue
		}
		if counts != sliceSettling {
			mine = append(mine, slicedSample{counts == sliceOn, time.Since(t)})
		}
		l.done.Add(1)
	}
	l.mu.Lock()
	l.samples = append(l.samples, mine...)
	l.mu.Unlock()
}

// result is the rate over elapsed and the latency percentiles of the
// requests of the slices on, or off.
func (l *slicedLoad) result(name string, on bool, clients int, elapsed time.Duration) Result {
	var took []time.Duration
	for _, x := range l.samples {
		if x.on == on {
			took = append(took, x.took)
		}
	}
	r := Result{Mode: name, Clients: clients, Ops: len(took)}
	if elapsed > 0 {
		r.PerSecond = float64(len(took)) / elapsed.Seconds()
	}
	r.P50, r.P90, r.P99 = percentiles(took)
	return r
}

// untilSliceEnds waits until end, or until ctx ends, calling progress every
// two seconds meanwhile.
func untilSliceEnds(ctx context.Context, end time.Time, progress func()) {
	for tick := time.NewTicker(2 * time.Second); ; {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			tick.Stop()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(left):
		case <-tick.C:
			progress()
		}
	}
}

// expiredKeys puts n finished keys past their retention and n tombstones
// past theirs in the table, keyed prefix and a random-looking string (as
// clients' UUIDs are spread over the unique index), each with the payment
// it created, its response a payment's size, as a day (and a month) of
// traffic leaves them: they expired over the last hour, oldest first.
func expiredKeys(ctx context.Context, pool *pgxpool.Pool, prefix string, n int) error {
	if n <= 0 {
		return nil
	}
	for _, stage := range []struct {
		suffix, point string
		age           string // how long ago the first key was created
	}{
		// The tombstones first: they are a month older, and their rows are
		// not among the finished keys' pages.
		{"-t", idempotency.RecoveryExpired, "31 days 1 hour"},
		{"", idempotency.RecoveryFinished, "25 hours"},
	} {
		if _, err := pool.Exec(ctx, expiredKeysSQL, n, prefix+stage.suffix, stage.point, stage.age); err != nil {
			return fmt.Errorf("put expired keys in the table: %w", err)
		}
	}
	_, err := pool.Exec(ctx, `VACUUM ANALYZE idempotency_keys, payments`)
	return err
}

// expiredKeysSQL inserts $1 keys at recovery point $3 (finished or expired)
// and their payments; the first was created $4 ago, the rest over the hour
// after it. A finished key expires a day after it was created, a tombstone
// 31 days after: both within the last hour.
const expiredKeysSQL = `
WITH k AS (
	INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
		resource_type, resource_id, response_status, response_headers, response_body,
		created_at, updated_at, finished_at, expires_at)
	SELECT 'ten_globex', $2 || md5('key' || $2 || i), 'POST', '/v1/payments', sha256(($2 || i)::bytea), $3,
		'payment', p.id,
		CASE WHEN $3 = 'finished' THEN 201 END,
		CASE WHEN $3 = 'finished' THEN jsonb_build_object('Content-Type', 'application/json', 'Location', '/v1/payments/' || p.id) END,
		CASE WHEN $3 = 'finished' THEN convert_to(json_build_object('id', p.id, 'object', 'payment', 'amount', 1000,
			'currency', 'USD', 'payment_method', 'pm_card_visa', 'description', NULL, 'metadata', '{}'::json,
			'status', 'succeeded', 'failure_code', NULL, 'failure_message', NULL,
			'processor_charge_id', 'ch_' || md5(p.id), 'amount_refunded', 0,
			'created_at', p.created, 'updated_at', p.created)::text, 'UTF8') END,
		p.created, CASE WHEN $3 = 'finished' THEN p.created ELSE p.created + interval '24 hours' END, p.created,
		p.created + CASE WHEN $3 = 'finished' THEN interval '24 hours' ELSE interval '31 days' END
	FROM generate_series(1, $1::int) i,
		LATERAL (SELECT 'pay_' || substr(md5($2 || i), 1, 24) AS id,
			now() - $4::interval + i * (interval '1 hour' / $1::int) AS created) p
	RETURNING id, tenant_id, resource_id, created_at)
INSERT INTO payments (id, tenant_id, idempotency_key_id, amount, currency, payment_method, status,
	processor_charge_id, settled_by, created_at, updated_at)
SELECT resource_id, tenant_id, id, 1000, 'USD', 'pm_card_visa', 'succeeded', 'ch_' || md5(resource_id), 'worker',
	created_at, created_at
FROM k`

// walWritten reads the server's WAL written and checkpoints begun so far;
// zeros when it cannot.
func walWritten(ctx context.Context, pool *pgxpool.Pool) (wal, checkpoints int64) {
	_ = pool.QueryRow(ctx, `SELECT (SELECT wal_bytes FROM pg_stat_wal)::bigint,
	(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)`).Scan(&wal, &checkpoints)
	return wal, checkpoints
}

// reaper is the worker's reap job, on a pool of its own whose statements
// are timed.
type reaper struct {
	pool  *pgxpool.Pool
	job   *jobs.ReapWorker
	timer *batchTimer
}

func newReaper(ctx context.Context, cfg Config, st *stack) (*reaper, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	timer := &batchTimer{}
	pcfg.ConnConfig.Tracer = timer
	pcfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	w := st.worker
	store := &idempotency.Store{DB: pool, Retention: w.KeyRetention.KeyRetention, TombstoneRetention: w.TombstoneRetention}
	pace := w.ReapPace()
	if cfg.RetentionPace != nil {
		pace = *cfg.RetentionPace
		if pace.Batch == 0 {
			pace.Batch = w.ReapBatch
		}
	}
	job := &jobs.ReapWorker{Keys: store, Ops: &operation.Runner{DB: pool}, Pace: pace,
		EventRetention: w.EventRetention, Logger: slog.New(slog.DiscardHandler),
		Webhooks: webhooks.Retention{Events: w.WebhookEventRetention, Secrets: w.WebhookSecretRetention}}
	return &reaper{pool: pool, job: job, timer: timer}, nil
}

// pause is the reaper's pause after each batch, as a multiple of its time.
func (r *reaper) pause() float64 { return r.job.Pace.Pause }

// run is one run of the reap job. It returns how many keys and tombstones
// it reaped.
func (r *reaper) run(ctx context.Context) (int, error) {
	var reaped int
	r.job.Reaped = func(expired, deleted int) { reaped = expired + deleted }
	err := r.job.Work(ctx, nil)
	return reaped, err
}

// reap runs the reap job until nothing is left, with no timeout.
func (r *reaper) reap(ctx context.Context) error {
	for {
		n, err := r.run(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// slice runs the reap job, one run after another, until a run finds nothing
// to reap (it returns true) or ctx ends. Store.Reap ends a run cleanly
// when ctx's deadline is too near for its next batch: then the slice waits
// for its end.
func (r *reaper) slice(ctx context.Context) bool {
	deadline, _ := ctx.Deadline()
	for ctx.Err() == nil {
		reaped, err := r.run(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			_ = timer.Sleep(ctx, 100*time.Millisecond)
		case reaped == 0:
			return true
		case time.Until(deadline) < time.Second:
			<-ctx.Done()
		}
	}
	return false
}

func (r *reaper) close() { r.pool.Close() }

// batchTimer is a pgx tracer that times the reaper's statements on the keys.
type batchTimer struct {
	mu      sync.Mutex
	batches []batch
}

type batch struct {
	expire     bool // an expiry (UPDATE), else a tombstones' delete
	start, end time.Time
	rows       int64
}

type queryStartKey struct{}

type queryStart struct {
	sql string
	at  time.Time
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *batchTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, queryStartKey{}, queryStart{sql: data.SQL, at: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *batchTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	s, ok := ctx.Value(queryStartKey{}).(queryStart)
	if !ok || data.Err != nil {
		return
	}
	expire := strings.Contains(s.sql, "UPDATE idempotency_keys")
	if !expire && !strings.Contains(s.sql, "DELETE FROM idempotency_keys") {
		return
	}
	t.mu.Lock()
	t.batches = append(t.batches, batch{expire: expire, start: s.at, end: time.Now(), rows: data.CommandTag.RowsAffected()})
	t.mu.Unlock()
}

func (t *batchTimer) reset() {
	t.mu.Lock()
	t.batches = nil
	t.mu.Unlock()
}

// stages sums the batches timed since the last reset, each followed by a
// pause of pause times its time.
func (t *batchTimer) stages(pause float64) (expire, del Stage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := func(expire bool) Stage {
		var (
			s    Stage
			took []time.Duration
		)
		for _, b := range t.batches {
			if b.expire != expire || b.rows == 0 {
				continue
			}
			s.Rows += int(b.rows)
			took = append(took, b.end.Sub(b.start))
		}
		if len(took) == 0 {
			return s
		}
		slices.Sort(took)
		s.Batches = len(took)
		s.P50, s.P99, s.Max = took[len(took)/2], took[min(len(took)-1, int(0.99*float64(len(took))))], took[len(took)-1]
		for _, d := range took {
			s.Sum += d
		}
		s.Rested = time.Duration(float64(s.Sum) * pause)
		return s
	}
	return sum(true), sum(false)
}

// PrintRetention writes the retention mode's figures.
func PrintRetention(out io.Writer, r RetentionResult) {
	reaper := fmt.Sprintf("the worker's reap job, batches of about %s (REAP_BATCH_TIME; at most REAP_BATCH), a rest of %g times each batch's time after it (REAP_REST)", r.Pace.Target, r.Pace.Pause)
	fmt.Fprintf(out, "\nretention: %d finished keys past their retention and %d tombstones past theirs, each with its payment; reaper: %s, on and off in slices of %s; REAP_BATCH %d, JOB_TIMEOUT %s, REAP_INTERVAL %s\n",
		r.Keys, r.Keys, reaper, r.Slice, r.Batch, r.JobTimeout, r.Interval)
	Print(out, []Result{r.Baseline, r.Reaping})
	fmt.Fprintf(out, "p99 with the reaper running: %.2f of the baseline (goal: at most 1.20); requests failed: %d without the reaper, %d with it\n",
		r.P99Ratio, r.BaselineErrors, r.ReapingErrors)
	fmt.Fprintf(out, "WAL written by the server: %.1f MB a second without the reaper, %.1f MB with it (%d and %d checkpoints begun): about %.1f kB a key reaped\n\n",
		r.BaselineWAL/1e6, r.ReapingWAL/1e6, r.BaselineCheckpoints, r.ReapingCheckpoints, r.WALPerKey()/1e3)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reaper stage\tunder load: rows\tper second (pauses included)\tbatches\tms a batch: mean\tp50\tp99\tmax\talone: ms a batch, mean\tp50\tper second\t")
	for _, s := range []struct {
		name         string
		load, nobody Stage
	}{{"expire (finished key to tombstone)", r.Expire, r.AloneExpire}, {"delete (tombstone, its payment's key unset)", r.Delete, r.AloneDelete}} {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", s.name, s.load.Rows, s.load.PerSecond(), s.load.Batches,
			ms(s.load.Mean()), ms(s.load.P50), ms(s.load.P99), ms(s.load.Max), ms(s.nobody.Mean()), ms(s.nobody.P50), s.nobody.PerSecond())
	}
	_ = tw.Flush()
	caught := fmt.Sprintf("not caught up: %d expired keys and %d tombstones left at the end of the window", r.LeftExpired, r.LeftTombstones)
	if r.CaughtUp {
		caught = fmt.Sprintf("caught up: every expired key and tombstone reaped within the window, in %.1fs of reaping", (r.Expire.Sum + r.Delete.Sum).Seconds())
	}
	fmt.Fprintf(out, "reaper: %s\n", caught)
	pace := "kept pace"
	if !r.KeptPace() {
		pace = "DID NOT keep pace"
	}
	fmt.Fprintf(out, "reaper: %.0f keys a second under load (an expiry and a delete each) against %.0f created a second: %.1fx; scheduled (at most JOB_TIMEOUT of every REAP_INTERVAL) %.0f a second: %s\n",
		r.Capacity(), r.Reaping.PerSecond, r.Capacity()/r.Reaping.PerSecond, r.Scheduled(), pace)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", msOf(d)) }
