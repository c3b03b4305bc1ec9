// Package metrics is what every process's Prometheus metrics share: the
// latency histograms' buckets, their exemplars (the trace id of an
// observation, so that a slow bucket opens its trace and its log lines),
// and the /metrics handler that serves them.
package metrics

import (
	"context"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

// buckets are the upper bounds of every latency histogram, in seconds: from
// a fast read to past the longest wait anything here has, a request waiting
// its 30 s (IDEMPOTENCY_MAX_WAIT) or a job its timeout, so that those land
// in a bucket of their own rather than in +Inf.
var buckets = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60}

// exemplarEvery is how often a bucket of a series takes a new exemplar. An
// exemplar costs allocations the observation alone does not, and a scrape
// shows only a bucket's last one, so a busy bucket refreshes it once a
// second rather than on every observation; a bucket seldom hit, the slow
// one an operator opens, gets each of its observations' trace ids.
const exemplarEvery = time.Second

// TraceIDLabel is the exemplars' label, the trace id in hex as the logs and
// OpenTelemetry print it.
const TraceIDLabel = "trace_id"

// Histogram is a latency histogram over the shared buckets.
type Histogram struct{ vec *prometheus.HistogramVec }

// NewHistogram registers a latency histogram, in seconds, with labels.
func NewHistogram(reg prometheus.Registerer, name, help string, labels ...string) Histogram {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets[:]}, labels)
	reg.MustRegister(vec)
	return Histogram{vec: vec}
}

// With resolves the series of the label values: it exists, at zero, from
// then on. The caller keeps it, so that an observation resolves no label.
func (h Histogram) With(labelValues ...string) *Latency {
	obs := h.vec.WithLabelValues(labelValues...)
	return &Latency{obs: obs, exemplars: obs.(prometheus.ExemplarObserver)}
}

// Latency is one series of a Histogram.
type Latency struct {
	obs       prometheus.Observer
	exemplars prometheus.ExemplarObserver
	// last is when each bucket (and +Inf, the last) last took an
	// exemplar, in Unix nanoseconds.
	last [len(buckets) + 1]atomic.Int64
}

// Observe records d. When ctx has a valid span context (every request and
// job has one, sampled or not: the logs carry its trace id too), its trace
// id is the bucket's exemplar, at most once a second a bucket.
func (l *Latency) Observe(ctx context.Context, d time.Duration) {
	v := d.Seconds()
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !l.due(v) {
		l.obs.Observe(v)
		return
	}
	l.exemplars.ObserveWithExemplar(v, prometheus.Labels{TraceIDLabel: sc.TraceID().String()})
}

// due reports whether v's bucket takes an exemplar now, and if so marks it
// taken: Prometheus's bucket is the first whose bound is at least v.
func (l *Latency) due(v float64) bool {
	last := &l.last[sort.SearchFloat64s(buckets[:], v)]
	now, prev := time.Now().UnixNano(), last.Load()
	return now-prev >= int64(exemplarEvery) && last.CompareAndSwap(prev, now)
}

// Handler serves g's metrics on /metrics: in Prometheus's text format, or
// in OpenMetrics, with the exemplars, to a scraper that asks for it (Accept:
// application/openmetrics-text, as Prometheus does with exemplar storage on).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
