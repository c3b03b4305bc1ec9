package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/render"
)

// limited reports whether the tenant of r is over its rate limit
// (tenants.Limiter, across every API replica), and if so has answered r:
// 429 rate_limited with Retry-After (the rest of the window), before
// anything is read or reserved. A limit that cannot be counted fails closed,
// as the store does (503).
func (s *Server) limited(w http.ResponseWriter, r *http.Request) bool {
	if s.RateLimit == nil {
		return false
	}
	ok, wait, err := s.RateLimit.Allow(r.Context(), tenantID(r))
	switch {
	case err != nil:
		s.writeError(w, r, err)
		return true
	case !ok:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait/time.Second))))
		s.writeError(w, r, render.ErrRateLimited)
		return true
	}
	return false
}

// keyMetrics count what the idempotency protocol refused or replayed. They
// carry no tenant label: the number of tenants is not bounded, and a
// per-tenant count is a question for the logs (each line names its tenant),
// not for a time series. A spike of mismatches is a security signal:
// someone is probing keys.
type keyMetrics struct {
	created, replays, inUse, mismatches, limited prometheus.Counter
	// failures counts the answers the service, not the client, failed:
	// the store unreachable (503) or an unexpected error (500).
	failures *prometheus.CounterVec
}

// The kinds of payments_api_failures_total.
const (
	failureStore    = "store_unavailable"
	failureInternal = "internal"
)

func newKeyMetrics(reg prometheus.Registerer) *keyMetrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payments_api_failures_total",
		Help: "Requests the API failed: store_unavailable (503: service_unavailable, nothing executed, or outcome_unknown, the connection lost after the request was sent) or internal (500, logged with the request id).",
	}, []string{"kind"})
	failures.WithLabelValues(failureStore)
	failures.WithLabelValues(failureInternal)
	reg.MustRegister(failures)
	return &keyMetrics{
		failures:   failures,
		created:    counter("payments_idempotency_keys_created_total", "Idempotency keys created: requests that started an operation or stored a refusal."),
		replays:    counter("payments_idempotent_replays_total", "Responses replayed from an idempotency key."),
		inUse:      counter("payments_idempotency_key_in_use_total", "Requests refused 409 because another request held the key."),
		mismatches: counter("payments_idempotency_key_mismatch_total", "Keys reused with a different request (422): a spike is a security signal."),
		limited:    counter("payments_rate_limited_total", "Idempotent POSTs refused 429 for their tenant's rate limit."),
	}
}
