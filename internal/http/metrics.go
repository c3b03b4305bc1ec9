package http

import (
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	imetrics "github.com/example/payments/internal/metrics"
)

// metrics are the API's Prometheus series. Every label value comes from a
// small fixed set, so that no client, authenticated or not, can make a new
// series by sending a made-up method, path or status.
type metrics struct {
	requests *prometheus.CounterVec
	duration imetrics.Histogram
	// mu guards byRoute, and the writes of byMatch.
	mu sync.Mutex
	// byRoute are the series of each method and route pattern: every
	// route's from the start (route), any other's (a request unmatched, a
	// HEAD on a GET route, a method made up) from its first request,
	// bounded by the method and route labels' few values.
	byRoute map[routeKey]*routeMetrics
	// byMatch maps what chi matched, its patterns not yet joined, to the
	// series, copied on write: a request reads it with neither a lock nor
	// an allocation, where joining the patterns (chi's RoutePattern)
	// allocates.
	byMatch atomic.Pointer[map[matchKey]*routeMetrics]
}

// routeKey is a method label and a route pattern.
type routeKey struct{ method, route string }

// maxMatched is the deepest nesting of routers byMatch keeps; a deeper
// match joins its patterns on every request.
const maxMatched = 4

// matchKey is a method label and the patterns chi matched, one a router.
type matchKey struct {
	method   string
	patterns [maxMatched]string
}

// routeMetrics are one method and route's series, resolved once, so that a
// request resolves no label but its status class.
type routeMetrics struct {
	// requests is curried with the method and route.
	requests *prometheus.CounterVec
	duration *imetrics.Latency
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_http_requests_total",
			Help: "HTTP requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other), " +
				"route pattern (or unmatched) and status class (1xx to 5xx; other for a code outside 100-599).",
		}, []string{"method", "route", "status"}),
		duration: imetrics.NewHistogram(reg, "payments_http_request_duration_seconds",
			"HTTP request latency by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other) "+
				"and route pattern (or unmatched), a POST's wait for its operation (Prefer: wait, up to 30 s) included.",
			"method", "route"),
		byRoute: map[routeKey]*routeMetrics{},
	}
	m.byMatch.Store(&map[matchKey]*routeMetrics{})
	reg.MustRegister(m.requests)
	return m
}

// route resolves the series of every route routes serves, each latency
// series there at zero from the start.
func (m *metrics) route(routes chi.Routes) {
	// Walk fails only with what the function returns: never.
	_ = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		m.resolve(routeKey{methodLabel(method), route})
		return nil
	})
}

// resolve returns k's series, made on first use.
func (m *metrics) resolve(k routeKey) *routeMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	rm, ok := m.byRoute[k]
	if !ok {
		rm = &routeMetrics{
			requests: m.requests.MustCurryWith(prometheus.Labels{"method": k.method, "route": k.route}),
			duration: m.duration.With(k.method, k.route),
		}
		m.byRoute[k] = rm
	}
	return rm
}

// series are the series of the request's method and route pattern, so that
// ids in paths do not make a series each.
func (m *metrics) series(r *http.Request) *routeMetrics {
	method := methodLabel(r.Method)
	rc := chi.RouteContext(r.Context())
	if rc == nil || len(rc.RoutePatterns) > maxMatched {
		return m.resolve(routeKey{method, routePattern(rc)})
	}
	k := matchKey{method: method}
	copy(k.patterns[:], rc.RoutePatterns)
	if rm, ok := (*m.byMatch.Load())[k]; ok {
		return rm
	}
	rm := m.resolve(routeKey{method, routePattern(rc)})
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := maps.Clone(*m.byMatch.Load())
	seen[k] = rm
	m.byMatch.Store(&seen)
	return rm
}

// routePattern is the route label of what rc matched: its pattern, or
// unmatched.
func routePattern(rc *chi.Context) string {
	if rc != nil {
		if pattern := rc.RoutePattern(); pattern != "" {
			return pattern
		}
	}
	return "unmatched"
}

// observe records one finished request: its count by status class, and
// its latency, with its trace id as the bucket's exemplar.
func (m *metrics) observe(r *http.Request, status int, elapsed time.Duration) {
	rm := m.series(r)
	rm.requests.WithLabelValues(statusClass(status)).Inc()
	rm.duration.Observe(r.Context(), elapsed)
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
