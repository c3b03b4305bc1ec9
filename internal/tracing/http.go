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

// Handler wraps a server's handler in a server span per request, a child of
// the caller's span when the request carries a traceparent. Health checks
// make none: load balancers poll them. Put Route in the router, so that each
// span is named after its route.
func Handler(h http.Handler, tp trace.TracerProvider) http.Handler {
	return otelhttp.NewHandler(h, "",
		otelhttp.WithTracerProvider(Or(tp)),
		otelhttp.WithPropagators(Propagator),
		otelhttp.WithFilter(func(r *http.Request) bool {
			return r.URL.Path != "/healthz" && r.URL.Path != "/readyz"
		}))
}

// Route is chi middleware naming the request's span after the route that
// served it ("POST /v1/payments/{id}/refunds"), never the raw path with its
// ids, and recording the route as http.route. An unrouted request keeps the
// method alone.
func Route(next http.Handler) http.Handler {
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
