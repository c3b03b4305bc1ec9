package http

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the API's Prometheus series. Every label value comes from a
// small fixed set, so that no client, authenticated or not, can make a new
// series by sending a made-up method, path or status.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_http_requests_total",
			Help: "HTTP requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), " +
				"route pattern (or unmatched) and status class (1xx to 5xx; other for a code outside 100-599).",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "payments_http_request_duration_seconds",
			Help: "HTTP request latency by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other) " +
				"and route pattern (or unmatched).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe records one finished request under its route pattern, so that ids
// in paths do not make a series each.
func (m *metrics) observe(r *http.Request, status int, elapsed time.Duration) {
	route := "unmatched"
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		route = rc.RoutePattern()
	}
	method := methodLabel(r.Method)
	m.requests.WithLabelValues(method, route, statusClass(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(elapsed.Seconds())
}

// methodLabel names a method by itself only when it is a standard one the
// API could serve; methods are case-sensitive, so "get" is other too.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	default:
		return "other"
	}
}

// statusClasses are the status label's values, by hundreds.
var statusClasses = [...]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClass reduces a status code to its class. A handler that wrote
// nothing reports 0, and net/http sent 200 for it.
func statusClass(status int) string {
	if status == 0 {
		return "2xx"
	}
	if class := status / 100; class >= 1 && class <= 5 {
		return statusClasses[class]
	}
	return "other"
}

func metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
