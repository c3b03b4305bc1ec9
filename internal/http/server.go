// Package http is the API's HTTP adapter: routing, authentication, request
// decoding, the Idempotency-Key protocol on the wire, and problem+json errors.
// It turns requests into calls on the payments and idempotency packages.
package http

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/tenants"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 64 << 10

// Server serves the API.
type Server struct {
	Tenants  *tenants.Store
	Payments *payments.Service
	Keys     *idempotency.Store
	Logger   *slog.Logger
	// Ready reports whether the database answers, for /readyz.
	Ready func(ctx context.Context) error
	// DefaultWait is how long a request waits for its operation to finish
	// when it sends no Prefer: wait; MaxWait caps what it may ask for.
	DefaultWait time.Duration
	MaxWait     time.Duration
	// RetryAfter is what 202, 409 and 503 responses suggest in Retry-After.
	RetryAfter time.Duration
	// Registry, when set, gets the API's metrics and is served on /metrics.
	Registry *prometheus.Registry

	metrics *metrics
}

// Handler returns the routed API with its middleware.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.RealIP, s.accessLog, middleware.Recoverer, echoIdempotencyKey)
	if s.Registry != nil {
		s.metrics = newMetrics(s.Registry)
		r.Method(http.MethodGet, "/metrics", metricsHandler(s.Registry))
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errRouteNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errMethodNotAllowed) })

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", serveOpenAPI)
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Post("/payments", s.createPayment())
		r.Get("/payments", s.listPayments)
		r.Get("/payments/{id}", s.getPayment)
		r.Post("/payments/{id}/refunds", s.createRefund())
		r.Get("/refunds/{id}", s.getRefund)
		r.Get("/events", s.listEvents)
		r.Get("/idempotency-keys/{key}", s.getIdempotencyKey)
	})
	return r
}

func (s *Server) retryAfterSeconds() int {
	return max(1, int(s.RetryAfter.Round(time.Second)/time.Second))
}

type tenantKey struct{}

// authenticate resolves the bearer API key to its tenant.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			s.writeError(w, r, tenants.ErrUnauthorized)
			return
		}
		tenantID, err := s.Tenants.Authenticate(r.Context(), strings.TrimSpace(token))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenantID)))
	})
}

func tenantID(r *http.Request) string { return r.Context().Value(tenantKey{}).(string) }

// echoIdempotencyKey returns the request's Idempotency-Key on every response.
func echoIdempotencyKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Values("Idempotency-Key"); len(v) > 0 {
			w.Header().Set("Idempotency-Key", v[0])
		}
		next.ServeHTTP(w, r)
	})
}

// accessLog logs one line per request with its request id.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		ww.Header().Set("X-Request-Id", middleware.GetReqID(r.Context()))
		next.ServeHTTP(ww, r)
		if s.metrics != nil {
			s.metrics.observe(r, ww.Status(), time.Since(start))
		}
		s.Logger.Info("request", "request_id", middleware.GetReqID(r.Context()), "method", r.Method,
			"path", r.URL.Path, "status", ww.Status(), "bytes", ww.BytesWritten(), "duration", time.Since(start))
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only while the database answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		s.Logger.Warn("not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
