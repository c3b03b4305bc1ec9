package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/example/payments/internal/metrics"
)

// runMetrics are the latencies of job attempts, by kind and outcome (the
// result label): payments_job_run_duration_seconds.
type runMetrics struct {
	hist metrics.Histogram
	// mu guards series, resolved up front for the kinds registered, and on
	// first use for any other (a kind River runs that no worker here
	// registered never gets this far, so they stay few).
	mu     sync.Mutex
	series map[[2]string]*metrics.Latency
}

// Timed makes m time each attempt in reg, by the job's kind and its
// outcome, each of kinds' series there at zero from the start; an
// attempt's exemplar is its span's trace id. It returns m.
func (m *TraceWork) Timed(reg prometheus.Registerer, kinds ...string) *TraceWork {
	runs := &runMetrics{
		hist: metrics.NewHistogram(reg, "payments_job_run_duration_seconds",
			"River job attempts' latency (JOB_TIMEOUT bounds them), by kind and result: "+
				"ok, error (retried), snoozed (run again later), cancelled (no more attempts) or panic.",
			"kind", "result"),
		series: map[[2]string]*metrics.Latency{},
	}
	for _, kind := range kinds {
		for _, outcome := range Outcomes {
			runs.series[[2]string{kind, outcome}] = runs.hist.With(kind, outcome)
		}
	}
	m.runs = runs
	return m
}

// observe records an attempt of kind that took d and ended as outcome.
func (r *runMetrics) observe(ctx context.Context, kind, outcome string, d time.Duration) {
	k := [2]string{kind, outcome}
	r.mu.Lock()
	l, ok := r.series[k]
	if !ok {
		l = r.hist.With(kind, outcome)
		r.series[k] = l
	}
	r.mu.Unlock()
	l.Observe(ctx, d)
}

// addWorker adds w to workers, and its kind to kinds: the kinds whose attempts
// are timed from the start.
func addWorker[T river.JobArgs](workers *river.Workers, kinds *[]string, w river.Worker[T]) error {
	var args T
	*kinds = append(*kinds, args.Kind())
	return river.AddWorkerSafely(workers, w)
}
