// Package tracing sets up OpenTelemetry tracing for the service's programs,
// configured by OpenTelemetry's own libraries from the standard OTEL_*
// environment variables (the contrib autoexport and autoprop packages, and
// the SDK's resource detection), and holds the few pieces every hop shares:
// the propagator that carries a trace across processes, the server
// middleware that makes a span per request, and the client transport that
// makes a span per call and sends the context on.
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
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The values of OTEL_TRACES_EXPORTER.
const (
	// ExporterOTLP sends spans over OTLP, made by autoexport: gRPC or
	// HTTP/protobuf as OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says, to
	// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, with the exporter's other
	// standard variables (headers, timeout, compression, TLS).
	ExporterOTLP = "otlp"
	// ExporterConsole writes each span as a line of JSON to the program's
	// standard output, among its logs.
	ExporterConsole = "console"
	// ExporterNone exports nothing; spans and trace ids still exist.
	ExporterNone = "none"
)

// Propagator carries a trace across processes: what every hop injects and
// extracts, HTTP headers and job metadata alike. It is OTEL_PROPAGATORS's
// (by default W3C trace context and baggage, as the specification says);
// Setup, which a program's main calls before it builds anything, sets it,
// and makes it the global one too.
//
// Baggage is never taken from a request (Middleware reads only the trace
// context's own headers, bounded), and the service puts none in a
// context: a stranger's key-value pairs never travel with an operation,
// stored in job metadata and sent to the processor and to merchants.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// OTel is the tracing configuration every program reads, the standard
// OTEL_* variables; embedded in each program's configuration. The other
// standard variables (OTEL_EXPORTER_OTLP_*, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER, OTEL_BSP_*) are read by OpenTelemetry's libraries
// themselves, as the specification describes them.
type OTel struct {
	// Exporter is where spans go: otlp, console or none.
	Exporter string `envconfig:"OTEL_TRACES_EXPORTER" default:"none" desc:"where spans go: otlp (OTLP, see OTEL_EXPORTER_OTLP_PROTOCOL and OTEL_EXPORTER_OTLP_ENDPOINT), console (stdout) or none (trace ids in logs only)"`
	// ServiceName names the program in its spans; empty means
	// OTEL_RESOURCE_ATTRIBUTES's service.name, else the program's own name.
	ServiceName string `envconfig:"OTEL_SERVICE_NAME" desc:"the service name on the program's spans (default: service.name in OTEL_RESOURCE_ATTRIBUTES, else api, worker, fakeprocessor or demoreceiver)"`
	// Propagators lists the formats of the trace context sent and read,
	// comma-separated: tracecontext, baggage, b3, b3multi, jaeger, xray,
	// ottrace or none.
	Propagators string `envconfig:"OTEL_PROPAGATORS" default:"tracecontext,baggage" desc:"formats of the trace context sent and read, comma-separated: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace or none"`
}

// exporter reads Exporter; "" is none.
func (c OTel) exporter() (string, error) {
	switch name := strings.TrimSpace(c.Exporter); name {
	case "", ExporterNone:
		return ExporterNone, nil
	case ExporterOTLP, ExporterConsole:
		return name, nil
	}
	return "", fmt.Errorf("OTEL_TRACES_EXPORTER (%q) is not otlp, console or none", c.Exporter)
}

// propagator is the TextMapPropagator Propagators names; "" is the
// specification's default.
func (c OTel) propagator() (propagation.TextMapPropagator, error) {
	names := []string{"tracecontext", "baggage"}
	if strings.TrimSpace(c.Propagators) != "" {
		names = names[:0]
		for name := range strings.SplitSeq(c.Propagators, ",") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	p, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return nil, fmt.Errorf("OTEL_PROPAGATORS (%q): %w", c.Propagators, err)
	}
	return p, nil
}

// Validate refuses an exporter or a propagator this program does not know,
// naming the variable.
func (c OTel) Validate() error {
	if _, err := c.exporter(); err != nil {
		return err
	}
	_, err := c.propagator()
	return err
}

// NewProvider returns a TracerProvider for the program service, exporting
// as cfg says; the console exporter writes to console. Its resource is
// OpenTelemetry's: the SDK's attributes, then service.name the program's
// name unless OTEL_RESOURCE_ATTRIBUTES names another, OTEL_SERVICE_NAME
// (cfg.ServiceName) winning over both. It samples as the SDK's own
// variables say (OTEL_TRACES_SAMPLER), by default every trace its caller
// samples, and every new one. The caller shuts it down, which flushes what
// is left to export.
func NewProvider(ctx context.Context, cfg OTel, service string, console io.Writer) (*sdktrace.TracerProvider, error) {
	name, err := cfg.exporter()
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, cfg, service)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	switch name {
	case ExporterNone:
		// Nothing is exported, so nothing need be recorded: spans keep
		// their ids (the logs' trace_id, and what is propagated) at a
		// fraction of the cost of recording them.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	case ExporterOTLP:
		// autoexport reads OTEL_TRACES_EXPORTER (otlp, or unset in tests
		// that set cfg) and the OTLP exporter's own variables: the protocol
		// picks gRPC or HTTP/protobuf.
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	case ExporterConsole:
		// autoexport's console exporter writes to os.Stdout; this one
		// writes where the program's logs go, which a test reads.
		exp, err := stdouttrace.New(stdouttrace.WithWriter(console))
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
		}
		// For a person or a test reading stdout: each span is written
		// as it ends, in order with the logs.
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// newResource is the resource of the program service's spans: the SDK's
// attributes, service.name the program's, OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME over it, cfg.ServiceName last.
func newResource(ctx context.Context, cfg OTel, service string) (*resource.Resource, error) {
	opts := []resource.Option{resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv()}
	if cfg.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return res, nil
}

// Setup makes the program's TracerProvider (NewProvider) the global one,
// and the propagator OTEL_PROPAGATORS names Propagator and the global
// propagator. Only the programs' main call it, before they build anything;
// the process constructors take their provider explicitly, so that tests
// never share one through the globals. The returned shutdown flushes the
// spans not yet exported; call it on exit.
func Setup(ctx context.Context, cfg OTel, service string, console io.Writer) (shutdown func(context.Context) error, err error) {
	prop, err := cfg.propagator()
	if err != nil {
		return nil, err
	}
	tp, err := NewProvider(ctx, cfg, service, console)
	if err != nil {
		return nil, err
	}
	Propagator = prop
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(prop)
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return errors.Join(errors.New("flush spans"), err)
		}
		return nil
	}, nil
}
