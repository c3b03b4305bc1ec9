package tracing

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
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
// span when the request carries one in a format Propagator reads (a
// traceparent by default; b3, jaeger… as OTEL_PROPAGATORS says; Propagator
// is read once, here). Health checks make none: load
// balancers poll them. It reads only the trace context, bounded
// (inboundTraceContext): never baggage, which is then neither stored nor
// sent on. As chi middleware (first in the router), it names
// each span after the route that served it ("GET /v1/payments/{id}"), never
// the raw path with its ids, and records the route as http.route.
//
// Its attributes, OpenTelemetry's HTTP semantic conventions, are computed
// only for a span that is recorded: with nothing exported, a request pays
// for its span's ids (the logs' trace_id, and what is propagated) and
// nothing more. otelhttp computes them, and its metrics, for every request
// (the service counts its requests in Prometheus).
func Middleware(tp trace.TracerProvider) func(http.Handler) http.Handler {
	return serverSpans(tp, Propagator)
}

// serverSpans is Middleware reading the trace context prop propagates.
func serverSpans(tp trace.TracerProvider, prop propagation.TextMapPropagator) func(http.Handler) http.Handler {
	tracer := Or(tp).Tracer(instrumentation)
	fields := headerFields(prop.Fields())
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			if carrier := inboundTraceContext(r.Header, fields); carrier != nil {
				ctx = prop.Extract(ctx, carrier)
			}
			ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			r = r.WithContext(ctx)
			if !span.IsRecording() {
				next.ServeHTTP(w, r)
				return
			}
			span.SetAttributes(requestAttributes(r)...)
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				if pattern := rctx.RoutePattern(); pattern != "" {
					span.SetName(r.Method + " " + pattern)
					span.SetAttributes(semconv.HTTPRoute(pattern))
				}
			}
		})
	}
}

// The bounds of the trace context a request may carry. A traceparent is 55
// bytes in version 00, the only version defined; a longer one (a later
// version's extra fields, or junk) is ignored, and the request starts a
// trace of its own. W3C asks that a tracestate of up to 512 bytes be
// propagated; a longer one is dropped, the traceparent kept. The headers of
// the other formats OTEL_PROPAGATORS may name (b3, X-B3-*, uber-trace-id,
// X-Amzn-Trace-Id, ot-tracer-*) are ids and flags, far shorter than
// maxOtherField.
const (
	maxTraceparent = 55
	maxTracestate  = 512
	maxOtherField  = 256
)

// inboundTraceContext is what a server takes from the headers of a request:
// each of fields, the headers of the configured propagator, that is sent
// once and within its bound, and tracestate, several headers being one list
// (W3C trace context, 3.3.1.1), within maxTracestate. Nothing else is read,
// baggage least of all (its header, and the baggage prefixes of the jaeger
// and ottrace formats, which are not fields), whatever its size: what a
// client sends is carried no further than this trace's ids and a bounded
// tracestate. It is nil when the request carries none of them, as most
// requests do: nothing to extract.
func inboundTraceContext(h http.Header, fields []headerField) propagation.MapCarrier {
	var carrier propagation.MapCarrier
	set := func(field, value string) {
		if carrier == nil {
			carrier = propagation.MapCarrier{}
		}
		carrier[field] = value
	}
	for _, f := range fields {
		values := h[f.header]
		limit := maxOtherField
		switch strings.ToLower(f.name) {
		case "baggage":
			continue
		case "tracestate":
			if state := strings.Join(values, ","); state != "" && len(state) <= maxTracestate {
				set(f.name, state)
			}
			continue
		case "traceparent":
			limit = maxTraceparent
		}
		if len(values) == 1 && len(values[0]) <= limit {
			set(f.name, values[0])
		}
	}
	return carrier
}

// headerField is a field of a propagator, named as the propagator reads it
// from a carrier and as the server keys its header (canonical), so that a
// request looks it up without canonicalizing the name again.
type headerField struct{ name, header string }

func headerFields(names []string) []headerField {
	fields := make([]headerField, len(names))
	for i, name := range names {
		fields[i] = headerField{name, textproto.CanonicalMIMEHeaderKey(name)}
	}
	return fields
}

// instrumentation names this package's tracer.
const instrumentation = "github.com/example/payments/internal/tracing"

// requestAttributes are a server span's attributes of the request.
func requestAttributes(r *http.Request) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{method(r.Method), semconv.URLScheme(scheme), semconv.URLPath(r.URL.Path),
		semconv.NetworkProtocolVersion(fmt.Sprintf("%d.%d", r.ProtoMajor, r.ProtoMinor))}
	if attrs[0].Value.AsString() == "_OTHER" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(host))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	return attrs
}

// method is http.request.method: a method the conventions know, or _OTHER
// with the method as sent beside it.
func method(m string) attribute.KeyValue {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return semconv.HTTPRequestMethodKey.String(m)
	}
	return semconv.HTTPRequestMethodKey.String("_OTHER")
}

// Transport wraps base (nil: http.DefaultTransport) in a client span per
// request, and sends the span's context on as Propagator writes it (by
// default traceparent and tracestate; Propagator is read once, here). The
// span ends once the response's body is read to its end or closed, or with
// the round trip's error. As on the server side (Middleware), its attributes
// (OpenTelemetry's HTTP semantic conventions) are computed only for a span
// that is recorded: otelhttp's transport built its metrics' attributes for
// every call, to no meter, 4% of the worker's processor time a payment.
func Transport(base http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &clientSpans{base: base, tracer: Or(tp).Tracer(instrumentation), prop: Propagator}
}

// clientSpans is Transport's RoundTripper.
type clientSpans struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (t *clientSpans) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient))
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(clientAttributes(r)...)
	}
	// A RoundTripper must not change the request it is given.
	r = r.Clone(ctx)
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	res, err := t.base.RoundTrip(r)
	if err != nil {
		if recording {
			span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return res, err
	}
	if recording {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
		if res.StatusCode >= http.StatusBadRequest {
			span.SetStatus(codes.Error, http.StatusText(res.StatusCode))
		}
	}
	if res.Body == nil || res.Body == http.NoBody {
		span.End()
		return res, nil
	}
	res.Body = &spanBody{ReadCloser: res.Body, span: span}
	return res, nil
}

// spanBody ends its span at the body's end or close, whichever comes first.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

func (b *spanBody) end() { b.once.Do(func() { b.span.End() }) }

// clientAttributes are a client span's attributes of the request.
func clientAttributes(r *http.Request) []attribute.KeyValue {
	u := *r.URL
	u.User = nil // never a credential in a span
	attrs := []attribute.KeyValue{method(r.Method), semconv.URLFull(u.String())}
	if attrs[0].Value.AsString() == "_OTHER" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if host, port := r.URL.Hostname(), r.URL.Port(); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return attrs
}
