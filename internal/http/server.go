// Package http is the API's HTTP adapter: routing, authentication, request
// decoding, the Idempotency-Key protocol on the wire, rate limits and metrics;
// errors are answered as problem+json, as package render maps them.
// It turns requests into calls on the payments and idempotency packages.
package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/idempotency"
	imetrics "github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/internal/tracing"
	"github.com/example/payments/internal/webhooks"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 64 << 10

// Server serves the API.
type Server struct {
	Tenants *tenants.Store
	// Ops starts every operation, and answers for the processor's webhooks
	// and the events.
	Ops *operation.Service
	// Render maps every error to its problem, and names what keys created.
	Render *render.Renderer
	// Endpoints are the tenants' webhook endpoints.
	Endpoints *webhooks.Service
	Keys      *idempotency.Store
	Logger    *slog.Logger
	// Ready reports whether the database answers, for /readyz.
	Ready func(ctx context.Context) error
	// DefaultWait is how long a request waits for its operation to finish
	// when it sends no Prefer: wait; MaxWait caps what it may ask for.
	DefaultWait time.Duration
	MaxWait     time.Duration
	// RetryAfter is what 202, 409 and 503 responses suggest in Retry-After.
	RetryAfter time.Duration
	// Registry, when set, gets the API's metrics, which Internal serves on
	// /metrics: never the public port.
	Registry *prometheus.Registry
	// RateLimit limits each tenant's idempotent POSTs across every API
	// replica; nil is off.
	RateLimit *tenants.Limiter
	// ProcessorWebhooks receives the processor's webhooks.
	ProcessorWebhooks ProcessorWebhooks
	// TrustedProxies are the only peers whose forwarding headers
	// (X-Forwarded-For) are believed.
	TrustedProxies Proxies
	// AuthThrottle limits failed authentications per client address.
	AuthThrottle AuthThrottle
	// Tracer makes a server span of each request, a child of the caller's
	// when it sends a traceparent; nil means the global provider.
	Tracer trace.TracerProvider

	metrics        *metrics
	keyMetrics     *keyMetrics
	webhookMetrics *prometheus.CounterVec
	// failures counts failed authentications per client (AuthThrottle).
	failures *tenants.Throttle
}

// Handler returns the routed API with its middleware, each request a
// server span named after its route.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	// GetHead answers HEAD on every GET route, as HTTP clients expect.
	s.failures = &tenants.Throttle{Failures: s.AuthThrottle.Failures, Window: s.AuthThrottle.Window}
	r.Use(tracing.Middleware(s.Tracer), clientAddress(s.TrustedProxies), s.accessLog, middleware.Recoverer,
		echoIdempotencyKey, middleware.GetHead)
	if s.Registry != nil {
		s.metrics = newMetrics(s.Registry)
		s.keyMetrics = newKeyMetrics(s.Registry)
		s.webhookMetrics = newWebhookMetrics(s.Registry)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, render.ErrRouteNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", strings.Join(allowed(r, req), ", "))
		s.writeError(w, req, render.ErrMethodNotAllowed)
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", serveOpenAPI)
	r.Route("/v1", func(r chi.Router) {
		// The subrouter's middleware runs before it routes, so every
		// request under /v1 is authenticated before it can be found unknown
		// (404) or sent with the wrong method (405): without a key, nothing
		// tells a route from none.
		r.Use(s.authenticateExcept(http.MethodPost, processorWebhooksPath))
		// The processor authenticates by its signature, not a tenant's key.
		r.Post(strings.TrimPrefix(processorWebhooksPath, "/v1"), s.receiveProcessorWebhook)
		// The tenants' routes, authenticated above.
		r.Group(func(r chi.Router) {
			r.Post("/payments", s.createPayment())
			r.Get("/payments", s.listPayments)
			r.Get("/payments/{id}", s.getPayment)
			r.Post("/payments/{id}/refunds", s.createRefund())
			r.Get("/refunds/{id}", s.getRefund)
			r.Get("/events", s.listEvents)
			r.Get("/events/{id}", s.getEvent)
			r.Get("/events/{id}/deliveries", s.listEventDeliveries)
			r.Post("/webhook_endpoints", s.createEndpoint())
			r.Get("/webhook_endpoints", s.listEndpoints)
			r.Get("/webhook_endpoints/{id}", s.getEndpoint)
			r.Post("/webhook_endpoints/{id}", s.updateEndpoint())
			r.Delete("/webhook_endpoints/{id}", s.deleteEndpoint)
			r.Post("/webhook_endpoints/{id}/rotate_secret", s.rotateSecret())
			r.Post("/webhook_endpoints/{id}/resend", s.resend())
			r.Post("/webhook_endpoints/{id}/recover", s.recoverEndpoint())
			r.Get("/webhook_endpoints/{id}/deliveries", s.listDeliveries)
			r.Get("/idempotency-keys/{key}", s.getIdempotencyKey)
		})
	})
	if s.metrics != nil {
		s.metrics.route(r)
	}
	return r
}

// Internal is what the API serves on its internal listener, for operators
// and Prometheus only: /metrics and /healthz.
func (s *Server) Internal() http.Handler {
	mux := http.NewServeMux()
	if s.Registry != nil {
		mux.Handle("GET /metrics", imetrics.Handler(s.Registry))
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	return mux
}

func (s *Server) retryAfterSeconds() int {
	return max(1, int(s.RetryAfter.Round(time.Second)/time.Second))
}

// allowed lists the methods that route the request's path, for the Allow
// header of a 405.
func allowed(routes chi.Routes, r *http.Request) []string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete} {
		probe := m
		if m == http.MethodHead {
			probe = http.MethodGet // GetHead answers HEAD wherever GET is routed
		}
		if routes.Match(chi.NewRouteContext(), probe, path) {
			methods = append(methods, m)
		}
	}
	return methods
}

// processorWebhooksPath is the one path under /v1 that takes no API key,
// and only with POST: the processor's signature authenticates it.
const processorWebhooksPath = "/v1/processor/webhooks"

// authenticateExcept is authenticate for every request but those of method
// to path exactly, as chi routes them (the raw path when the path has
// escapes), which go on as they are.
func (s *Server) authenticateExcept(method, path string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		authenticated := s.authenticate(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			routed := r.URL.RawPath
			if routed == "" {
				routed = r.URL.Path
			}
			if r.Method == method && routed == path {
				next.ServeHTTP(w, r)
				return
			}
			authenticated.ServeHTTP(w, r)
		})
	}
}

// authenticate resolves the bearer API key to its tenant. The header must be
// sent once, with the Bearer scheme in any case (RFC 9110).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, counted := clientKey(r)
		if blocked, left := s.failures.Blocked(client); counted && blocked {
			s.refuseThrottled(w, r, left)
			return
		}
		failed := func() {
			if counted {
				s.failures.Failed(client)
			}
		}
		values := r.Header["Authorization"]
		if len(values) > 1 {
			failed()
			s.writeError(w, r, fmt.Errorf("%w: send the Authorization header once", tenants.ErrUnauthorized))
			return
		}
		scheme, token, _ := strings.Cut(strings.TrimSpace(strings.Join(values, "")), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			failed()
			s.writeError(w, r, tenants.ErrUnauthorized)
			return
		}
		tenantID, err := s.Tenants.Authenticate(r.Context(), strings.TrimSpace(token))
		if errors.Is(err, tenants.ErrUnauthorized) {
			failed()
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("tenant.id", tenantID))
		fieldsOf(r).tenant = tenantID
		next.ServeHTTP(w, r)
	})
}

// tenantID is the tenant authenticate found for r.
func tenantID(r *http.Request) string { return fieldsOf(r).tenant }

// The headers every request reads and every response sets are named by
// their canonical names (textproto.CanonicalMIMEHeaderKey) straight in the
// map, as the server keys what it parses: Get, Values and Set canonicalize
// the name again on each call, a dozen times a request.

// firstValue is a header's first value, as Header.Get returns it.
func firstValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}

// echoIdempotencyKey returns the request's Idempotency-Key on every response.
func echoIdempotencyKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header["Idempotency-Key"]; len(v) > 0 {
			w.Header()["Idempotency-Key"] = v[:1:1]
		}
		next.ServeHTTP(w, r)
	})
}

// newRequestID is a request id of the server's own making.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return "req_" + hex.EncodeToString(b)
}

// maxLoggedClientID bounds what the access log keeps of a client's request id.
const maxLoggedClientID = 128

// accessLog gives every request an id of the server's own making, in its
// X-Request-Id response header, on its span and in its context
// (requestIDOf), and logs one line per request with it and the trace and
// span ids of its server span. An X-Request-Id the client sent is never
// adopted as the server's id (it could collide or mislead); the line keeps
// it apart, as client_request_id.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		fields := &requestFields{id: newRequestID()}
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("request_id", fields.id))
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		ww.Header()["X-Request-Id"] = []string{fields.id}
		r = r.WithContext(context.WithValue(r.Context(), requestFieldsKey{}, fields))
		next.ServeHTTP(ww, r)
		elapsed := time.Since(start)
		if s.metrics != nil {
			s.metrics.observe(r, ww.Status(), elapsed)
		}
		// The line goes to the handler as a Record of no source: LogAttrs
		// would walk the stack for its caller on every request, this one
		// line.
		log := s.Logger.Handler()
		if !log.Enabled(r.Context(), slog.LevelInfo) {
			return
		}
		attrs := make([]slog.Attr, 0, 10)
		attrs = append(attrs, slog.String("request_id", fields.id), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int("status", ww.Status()), slog.Int("bytes", ww.BytesWritten()),
			slog.Duration("duration", elapsed))
		if client := firstValue(r.Header["X-Request-Id"]); client != "" {
			attrs = append(attrs, slog.String("client_request_id", client[:min(len(client), maxLoggedClientID)]))
		}
		line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		line.AddAttrs(fields.appendAttrs(attrs, r)...)
		_ = log.Handle(r.Context(), line)
	})
}

// requestFields are a request's one value in its context (accessLog): its
// id, and what it turns out to be about, filled in as it is handled, for
// its access log line: the tenant (which the routes read, tenantID), and
// the resource its key made or its path names.
type requestFields struct {
	id       string
	tenant   string
	resource idempotency.ResourceRef
}

type requestFieldsKey struct{}

// fieldsOf is r's requestFields; nil outside accessLog.
func fieldsOf(r *http.Request) *requestFields { return fieldsIn(r.Context()) }

func fieldsIn(ctx context.Context) *requestFields {
	f, _ := ctx.Value(requestFieldsKey{}).(*requestFields)
	return f
}

// requestIDOf is the id of the request ctx is of; "" outside accessLog.
func requestIDOf(ctx context.Context) string {
	if f := fieldsIn(ctx); f != nil {
		return f.id
	}
	return ""
}

// maxLoggedKey bounds what the access log keeps of an Idempotency-Key.
const maxLoggedKey = 255

// appendAttrs appends the fields to attrs as log attributes, with the
// request's Idempotency-Key, so that a request's line joins the lines of its
// operation.
func (f *requestFields) appendAttrs(attrs []slog.Attr, r *http.Request) []slog.Attr {
	if f.tenant != "" {
		attrs = append(attrs, slog.String("tenant_id", f.tenant))
	}
	if key := firstValue(r.Header["Idempotency-Key"]); key != "" {
		attrs = append(attrs, slog.String("idempotency_key", key[:min(len(key), maxLoggedKey)]))
	}
	if f.resource.Type != "" {
		attrs = append(attrs, slog.String(f.resource.Type+"_id", f.resource.ID))
	}
	return attrs
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only while the database answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		s.Logger.WarnContext(ctx, "not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
