// Package tracing sets up OpenTelemetry tracing for the service's programs,
// as the standard OTEL_* environment variables describe it, and holds the
// few pieces every hop shares: the propagator that carries a trace across
// processes (W3C trace context, never baggage), the server middleware that
// makes a span per request, and the client transport that makes a span per
// call and sends the context on.
//
// A program always has a real SDK TracerProvider, even with no exporter
// (OTEL_TRACES_EXPORTER=none, the default): its spans have valid trace ids,
// which the logs carry (process.NewLogger), so that the lines of one
// operation join up across the programs whether or not the spans are
// exported anywhere.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The values of OTEL_TRACES_EXPORTER.
const (
	// ExporterOTLP sends spans over OTLP/HTTP, configured by the exporter's
	// own variables (OTEL_EXPORTER_OTLP_ENDPOINT, _TRACES_ENDPOINT, _HEADERS…).
	ExporterOTLP = "otlp"
	// ExporterConsole writes each span as a line of JSON to the program's
	// standard output, among its logs.
	ExporterConsole = "console"
	// ExporterNone exports nothing; spans and trace ids still exist.
	ExporterNone = "none"
)

// Propagator carries a trace across processes: the W3C traceparent and
// tracestate. It is what every hop injects and extracts, HTTP headers and job
// metadata alike; Setup also makes it the global one.
//
// It carries no baggage. The service puts none in a context, and baggage
// that a client sent would otherwise travel with its operation: stored in
// job metadata, sent to the processor and to merchants' webhook endpoints,
// each hop an unbounded list of a stranger's key-value pairs.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// OTel is the tracing configuration every program reads, the standard
// OTEL_* variables; embedded in each program's configuration.
type OTel struct {
	// Exporter lists where spans go, comma-separated: otlp, console or none.
	Exporter string `envconfig:"OTEL_TRACES_EXPORTER" default:"none" desc:"where spans go: otlp (OTLP/HTTP, see OTEL_EXPORTER_OTLP_ENDPOINT), console (stdout) or none (trace ids in logs only); comma-separated for several"`
	// ServiceName names the program in its spans; empty means the
	// program's own name (api, worker, processor, receiver).
	ServiceName string `envconfig:"OTEL_SERVICE_NAME" desc:"the service name on the program's spans (default: api, worker, processor or receiver)"`
}

// exporters reads Exporter; "" is none.
func (c OTel) exporters() ([]string, error) {
	var out []string
	for _, name := range strings.Split(c.Exporter, ",") {
		switch name = strings.TrimSpace(name); name {
		case "", ExporterNone:
		case ExporterOTLP, ExporterConsole:
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER (%q): %q is not otlp, console or none", c.Exporter, name)
		}
	}
	return out, nil
}

// Validate refuses an exporter this program does not know, naming the
// variable.
func (c OTel) Validate() error {
	_, err := c.exporters()
	return err
}

// NewProvider returns a TracerProvider for the program service (or
// cfg.ServiceName when set), exporting as cfg says; the console exporter
// writes to console. It samples as the SDK's own variables say
// (OTEL_TRACES_SAMPLER), by default every trace its caller samples, and every
// new one. The caller shuts it down, which flushes what is left to export.
func NewProvider(ctx context.Context, cfg OTel, service string, console io.Writer) (*sdktrace.TracerProvider, error) {
	names, err := cfg.exporters()
	if err != nil {
		return nil, err
	}
	if cfg.ServiceName != "" {
		service = cfg.ServiceName
	}
	// Default reads OTEL_RESOURCE_ATTRIBUTES; the service name wins over it.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, name := range names {
		switch name {
		case ExporterOTLP:
			exp, err := otlptracehttp.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		case ExporterConsole:
			exp, err := stdouttrace.New(stdouttrace.WithWriter(console))
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
			}
			// For a person or a test reading stdout: each span is written
			// as it ends, in order with the logs.
			opts = append(opts, sdktrace.WithSyncer(exp))
		}
	}
	if len(names) == 0 {
		// Nothing is exported, so nothing need be recorded: spans keep
		// their ids (the logs' trace_id, and what is propagated) at a
		// fraction of the cost of recording them.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// Setup makes the program's TracerProvider (NewProvider) the global one,
// and Propagator the global propagator. Only the programs' main call it; the
// process constructors take their provider explicitly, so that tests never
// share one through the globals. The returned shutdown flushes the spans
// not yet exported; call it on exit.
func Setup(ctx context.Context, cfg OTel, service string, console io.Writer) (shutdown func(context.Context) error, err error) {
	tp, err := NewProvider(ctx, cfg, service, console)
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return errors.Join(errors.New("flush spans"), err)
		}
		return nil
	}, nil
}
