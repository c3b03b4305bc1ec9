package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/httprate"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/render"
)

// RateLimit is the per-tenant limit on idempotent POSTs, the requests that
// create keys: at most Requests in each Window, per API process. Zero
// Requests turns it off.
type RateLimit struct {
	Requests int
	Window   time.Duration
}

// newLimiter returns the limiter of l, or nil when it is off. A refused
// request is answered 429 rate_limited with Retry-After (the window), before
// anything is read or reserved.
func (s *Server) newLimiter(l RateLimit) *httprate.RateLimiter {
	if l.Requests <= 0 {
		return nil
	}
	return httprate.NewRateLimiter(l.Requests, l.Window,
		httprate.WithLimitHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(l.Window.Round(time.Second)/time.Second))))
			s.writeError(w, r, render.ErrRateLimited)
		}))
}

// limited reports whether the tenant of r is over its limit, and if so has
// answered r.
func (s *Server) limited(w http.ResponseWriter, r *http.Request) bool {
	return s.limiter != nil && s.limiter.RespondOnLimit(w, r, tenantID(r))
}

// keyMetrics count what the idempotency protocol refused or replayed. They
// carry no tenant label: the number of tenants is not bounded, and a
// per-tenant count is a question for the logs (each line names its tenant),
// not for a time series. A spike of mismatches is a security signal:
// someone is probing keys.
type keyMetrics struct {
	replays, inUse, mismatches, limited prometheus.Counter
}

func newKeyMetrics(reg prometheus.Registerer) *keyMetrics {
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	return &keyMetrics{
		replays:    counter("payments_idempotent_replays_total", "Responses replayed from an idempotency key."),
		inUse:      counter("payments_idempotency_key_in_use_total", "Requests refused 409 because another request held the key."),
		mismatches: counter("payments_idempotency_key_mismatch_total", "Keys reused with a different request (422): a spike is a security signal."),
		limited:    counter("payments_rate_limited_total", "Idempotent POSTs refused 429 for their tenant's rate limit."),
	}
}
