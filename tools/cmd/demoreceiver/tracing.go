package main

// Tracing, with OpenTelemetry's own libraries, configured by the standard
// OTEL_* variables. The receiver works the same without it: to drop it,
// delete this file, and in run the startTracing call and traced.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// startTracing sets the global TracerProvider and propagator up as the
// environment says: OTEL_TRACES_EXPORTER is otlp (autoexport, which reads
// the OTLP exporter's own variables: OTEL_EXPORTER_OTLP_PROTOCOL picks gRPC
// or HTTP/protobuf), console (each span a line of JSON on console) or none,
// the default, which sets nothing up; OTEL_PROPAGATORS names the formats of
// the trace context read; the spans' resource is the SDK's, with
// service.name service unless OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME
// say otherwise. The returned stop flushes the spans not yet exported,
// waiting a few seconds at most, so that an unreachable collector cannot
// hold the exit up.
func startTracing(ctx context.Context, service string, console io.Writer) (stop func() error, err error) {
	names := "tracecontext,baggage"
	if v := strings.TrimSpace(os.Getenv("OTEL_PROPAGATORS")); v != "" {
		names = v
	}
	var list []string
	for name := range strings.SplitSeq(names, ",") {
		list = append(list, strings.TrimSpace(name))
	}
	prop, err := autoprop.TextMapPropagator(list...)
	if err != nil {
		return nil, fmt.Errorf("OTEL_PROPAGATORS (%q): %w", names, err)
	}
	var opt sdktrace.TracerProviderOption
	switch exporter := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "", "none":
		return func() error { return nil }, nil
	case "otlp":
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
		}
		opt = sdktrace.WithBatcher(exp)
	case "console":
		exp, err := stdouttrace.New(stdouttrace.WithWriter(console))
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
		}
		opt = sdktrace.WithSyncer(exp) // each span written as it ends, among the logs
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER (%q) is not otlp, console or none", exporter)
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(opt, sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(prop)
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			return errors.Join(errors.New("flush spans"), err)
		}
		return nil
	}, nil
}

// traced makes a server span of each delivery, a child of the sender's
// span when the request carries its trace context (a traceparent, or
// whatever OTEL_PROPAGATORS reads), so that it shows in the trace of the
// event's settling. Health checks make none. Only the trace context is
// taken from a request, never its baggage. Without startTracing's set-up,
// the global provider makes no spans, at next to no cost.
func traced(next http.Handler, path string) http.Handler {
	tracer := otel.Tracer("demoreceiver")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		parent := trace.SpanContextFromContext(otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
		name := r.Method
		if r.URL.Path == path {
			name += " " + path
		}
		ctx, span := tracer.Start(trace.ContextWithRemoteSpanContext(r.Context(), parent), name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		r = r.WithContext(ctx)
		if !span.IsRecording() {
			next.ServeHTTP(w, r)
			return
		}
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status))
		if sw.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
