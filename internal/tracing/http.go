package tracing

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Or is tp, or the global TracerProvider when tp is nil: a process given
// none in its configuration traces as its program's Setup said.
func Or(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return otel.GetTracerProvider()
	}
	return tp
}

// Middleware makes a server span of each request, a child of the caller's
// span when the request carries a traceparent. Health checks make none: load
// balancers poll them. As chi middleware (first in the router), it names
// each span after the route that served it (see route).
func Middleware(tp trace.TracerProvider) func(http.Handler) http.Handler {
	server := otelhttp.NewMiddleware("",
		otelhttp.WithTracerProvider(Or(tp)),
		otelhttp.WithPropagators(Propagator),
		otelhttp.WithFilter(func(r *http.Request) bool {
			return r.URL.Path != "/healthz" && r.URL.Path != "/readyz"
		}))
	return func(next http.Handler) http.Handler { return server(route(next)) }
}

// route names the request's span after the chi route that served it ("GET
// /v1/payments/{id}"), never the raw path with its ids, and records
// the route as http.route. An unrouted request, or one outside chi, keeps
// the method alone.
func route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		rctx := chi.RouteContext(r.Context())
		if rctx == nil {
			return
		}
		if pattern := rctx.RoutePattern(); pattern != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Method + " " + pattern)
			span.SetAttributes(attribute.String("http.route", pattern))
		}
	})
}

// Transport wraps base (nil: http.DefaultTransport) in a client span per
// request, and sends the span's context on as traceparent and tracestate.
func Transport(base http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(Or(tp)), otelhttp.WithPropagators(Propagator))
}
