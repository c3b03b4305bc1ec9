package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the API's Prometheus series.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	replays  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_http_requests_total",
			Help: "HTTP requests by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payments_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_idempotent_replays_total",
			Help: "Responses replayed from an idempotency key.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.replays)
	return m
}

// observe records one finished request under its route pattern, so that ids
// in paths do not make a series each.
func (m *metrics) observe(r *http.Request, status int, elapsed time.Duration) {
	route := "unmatched"
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		route = rc.RoutePattern()
	}
	m.requests.WithLabelValues(r.Method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(r.Method, route).Observe(elapsed.Seconds())
}

func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
