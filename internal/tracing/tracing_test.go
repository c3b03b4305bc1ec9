package tracing

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/example/payments/tools/otlptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestExporters: each value of OTEL_TRACES_EXPORTER, and an unknown one
// (or a list, which autoexport does not read) refused with the variable
// named; an unknown propagator likewise.
func TestExporters(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "none", "console", "otlp", " console "} {
		if err := (OTel{Exporter: ok}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"jaeger", "zipkin", "console,stdout", "otlp,console"} {
		err := (OTel{Exporter: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("%q: %v, want an error naming OTEL_TRACES_EXPORTER", bad, err)
		}
		if _, err := NewProvider(context.Background(), OTel{Exporter: bad}, "api", nil); err == nil {
			t.Errorf("%q: NewProvider made a provider", bad)
		}
	}
	for _, ok := range []string{"", "tracecontext,baggage", "b3", "b3multi,tracecontext", "jaeger", "xray", "ottrace", "none"} {
		if err := (OTel{Propagators: ok}).Validate(); err != nil {
			t.Errorf("OTEL_PROPAGATORS=%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"w3c", "tracecontext,zipkin"} {
		if err := (OTel{Propagators: bad}).Validate(); err == nil || !strings.Contains(err.Error(), "OTEL_PROPAGATORS") {
			t.Errorf("OTEL_PROPAGATORS=%q: %v, want an error naming OTEL_PROPAGATORS", bad, err)
		}
	}
}

// TestOTLP: OTEL_TRACES_EXPORTER=otlp sends spans over the protocol
// OTEL_EXPORTER_OTLP_PROTOCOL names (gRPC to a gRPC receiver, HTTP/protobuf,
// the default, to an HTTP one) at OTEL_EXPORTER_OTLP_ENDPOINT, with the
// resource OTEL_RESOURCE_ATTRIBUTES gives: its service.name wins over the
// program's name, and OTEL_SERVICE_NAME over both. It sets the environment,
// so it runs alone.
func TestOTLP(t *testing.T) {
	for _, tt := range []struct {
		name, protocol, serviceName, want string
	}{
		{"GRPC", "grpc", "", "from-resource-attributes"},
		{"HTTP", "http/protobuf", "", "from-resource-attributes"},
		{"Default", "", "from-service-name", "from-service-name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := otlptest.HTTP(t)
			if tt.protocol == "grpc" {
				rcv = otlptest.GRPC(t)
			}
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tt.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource-attributes,deployment.environment.name=test")
			t.Setenv("OTEL_SERVICE_NAME", tt.serviceName)
			span := oneSpan(t, provider(t, OTel{Exporter: "otlp", ServiceName: tt.serviceName}, "api", nil), "exported")
			got, ok := rcv.Find("exported")
			if !ok {
				t.Fatalf("the receiver got %v, not the span", rcv.Spans())
			}
			want := cmp.Or(tt.protocol, "http/protobuf")
			if got.Protocol != want || got.TraceID != span.SpanContext().TraceID().String() {
				t.Errorf("span %+v, want trace %s over %s", got, span.SpanContext().TraceID(), want)
			}
			if got.Resource["service.name"] != tt.want || got.Resource["deployment.environment.name"] != "test" ||
				got.Resource["telemetry.sdk.language"] != "go" {
				t.Errorf("resource %v, want service.name %q, the other attributes and the SDK's", got.Resource, tt.want)
			}
		})
	}
	t.Run("BadProtocol", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
		if _, err := NewProvider(context.Background(), OTel{Exporter: "otlp"}, "api", nil); err == nil {
			t.Fatal("a provider made for an unknown OTLP protocol")
		}
	})
}

// TestPropagators: the server middleware continues the trace in the format
// OTEL_PROPAGATORS names, and only that one: with b3, a b3 header is read
// and a traceparent is not, and a job's metadata (what the outbox injects)
// carries b3.
func TestPropagators(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tt := range []struct {
		name, propagators, header, value string
		continued                        bool
	}{
		{"B3", "b3", "b3", traceID + "-00f067aa0ba902b7-1", true},
		{"B3IgnoresTraceparent", "b3", "traceparent", "00-" + traceID + "-00f067aa0ba902b7-01", false},
		{"B3Multi", "b3multi", "X-B3-TraceId", traceID, false}, // no span id: not a context
		{"Jaeger", "jaeger", "uber-trace-id", traceID + ":00f067aa0ba902b7:0:1", true},
		{"Default", "", "traceparent", "00-" + traceID + "-00f067aa0ba902b7-01", true},
		{"None", "none", "traceparent", "00-" + traceID + "-00f067aa0ba902b7-01", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prop, err := OTel{Propagators: tt.propagators}.propagator()
			if err != nil {
				t.Fatal(err)
			}
			var seen trace.SpanContext
			var metadata propagation.MapCarrier
			r := chi.NewRouter()
			r.Use(serverSpans(tp, prop))
			r.Get("/v1/x", func(w http.ResponseWriter, r *http.Request) {
				seen = trace.SpanContextFromContext(r.Context())
				metadata = propagation.MapCarrier{}
				prop.Inject(r.Context(), metadata)
			})
			req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
			req.Header.Set(tt.header, tt.value)
			r.ServeHTTP(httptest.NewRecorder(), req)
			if !seen.IsValid() || (seen.TraceID().String() == traceID) != tt.continued {
				t.Fatalf("handler's trace %s; continued %s: want %v", seen.TraceID(), traceID, tt.continued)
			}
			if tt.propagators == "b3" && !strings.HasPrefix(metadata["b3"], seen.TraceID().String()+"-"+seen.SpanID().String()) {
				t.Errorf("metadata %v, want the handler's span as b3", metadata)
			}
		})
	}
}

// TestNoneHasTraceIDs: with no exporter, spans still have valid ids, for
// the logs, and the service name is the program's unless OTEL_SERVICE_NAME
// names another.
func TestNoneHasTraceIDs(t *testing.T) {
	t.Parallel()
	tp := provider(t, OTel{Exporter: "none"}, "worker", nil)
	_, span := tp.Tracer("test").Start(context.Background(), "op")
	if !span.SpanContext().IsValid() {
		t.Fatal("no valid span context without an exporter")
	}
	if span.IsRecording() {
		t.Error("a span is recorded with nothing to export it to")
	}
	span.End()
	shutdown(t, tp)
	// The service name, on exported spans.
	for _, tt := range []struct{ cfg, want string }{{"", "worker"}, {"payments-worker", "payments-worker"}} {
		var out bytes.Buffer
		oneSpan(t, provider(t, OTel{Exporter: "console", ServiceName: tt.cfg}, "worker", &out), "op")
		if !strings.Contains(out.String(), `"Key":"service.name","Value":{"Type":"STRING","Value":"`+tt.want+`"}`) {
			t.Errorf("service.name is not %q in %s", tt.want, out.String())
		}
	}
}

// TestConsole: OTEL_TRACES_EXPORTER=console writes each span, as it ends,
// to the writer given.
func TestConsole(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tp := provider(t, OTel{Exporter: "console"}, "api", &out)
	_, span := tp.Tracer("test").Start(context.Background(), "console-span")
	span.End()
	if !strings.Contains(out.String(), span.SpanContext().TraceID().String()) || !strings.Contains(out.String(), "console-span") {
		t.Fatalf("console output %q lacks the span", out.String())
	}
	shutdown(t, tp)
}

// TestHTTPHop: a request through Transport reaches a server behind Handler
// as a child of the client span, its span named after the chi route, not the
// raw path.
func TestHTTPHop(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := chi.NewRouter()
	r.Use(Middleware(tp))
	r.Get("/v1/payments/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {})
	r.Get("/broken", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	srv := httptest.NewServer(r)
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil, tp)}
	defer client.CloseIdleConnections()

	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	for _, path := range []string{"/v1/payments/pay_123", "/healthz", "/broken"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	parent.End()

	servers := map[string]sdktrace.ReadOnlySpan{}
	var clients []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.SpanKind().String() {
		case "server":
			servers[s.Name()] = s
		case "client":
			clients = append(clients, s)
		}
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %q in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), parent.SpanContext().TraceID())
		}
	}
	server, broken := servers["GET /v1/payments/{id}"], servers["GET /broken"]
	if len(servers) != 2 || server == nil || broken == nil {
		t.Fatalf("server spans %v, want GET /v1/payments/{id} and GET /broken (none for /healthz)", slices.Collect(maps.Keys(servers)))
	}
	// OpenTelemetry's HTTP semantic conventions.
	for _, want := range []attribute.KeyValue{
		attribute.String("http.route", "/v1/payments/{id}"), attribute.String("http.request.method", "GET"),
		attribute.Int("http.response.status_code", http.StatusNoContent), attribute.String("url.path", "/v1/payments/pay_123"),
		attribute.String("url.scheme", "http"), attribute.String("network.protocol.version", "1.1"),
		attribute.String("client.address", "127.0.0.1"), attribute.String("server.address", "127.0.0.1"),
	} {
		if !hasAttr(server.Attributes(), want) {
			t.Errorf("server span attributes %v lack %v", server.Attributes(), want)
		}
	}
	if server.Status().Code != codes.Unset || broken.Status().Code != codes.Error {
		t.Errorf("statuses %v and %v, want unset for a 204 and an error for a 502", server.Status(), broken.Status())
	}
	if server.Parent().SpanID() == parent.SpanContext().SpanID() || !server.Parent().IsRemote() {
		t.Errorf("server span's parent %v is not the remote client span", server.Parent())
	}
	// A client span a call, ended once its body was closed, with the
	// conventions' attributes; a 5xx answer is an error.
	if len(clients) != 3 {
		t.Fatalf("%d client spans ended, want 3 (one a call)", len(clients))
	}
	for i, c := range clients {
		path := []string{"/v1/payments/pay_123", "/healthz", "/broken"}[i]
		status := []int{http.StatusNoContent, http.StatusOK, http.StatusBadGateway}[i]
		for _, want := range []attribute.KeyValue{
			attribute.String("http.request.method", "GET"), attribute.String("url.full", srv.URL+path),
			attribute.String("server.address", "127.0.0.1"), attribute.Int("http.response.status_code", status),
		} {
			if !hasAttr(c.Attributes(), want) {
				t.Errorf("client span %q attributes %v lack %v", c.Name(), c.Attributes(), want)
			}
		}
		if c.Name() != "HTTP GET" || c.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("client span %q, parent %v: want HTTP GET, a child of the caller", c.Name(), c.Parent().SpanID())
		}
		if wantErr := status >= 500; (c.Status().Code == codes.Error) != wantErr {
			t.Errorf("client span of %s: status %v", path, c.Status())
		}
	}
	if clients[0].SpanContext().SpanID() != server.Parent().SpanID() {
		t.Errorf("server span's parent %v, want the client span %v", server.Parent().SpanID(), clients[0].SpanContext().SpanID())
	}
	shutdown(t, tp)
}

// TestHTTPNotRecorded: with nothing exported, a request's span is not
// recorded, yet the handler's context holds it, valid, in the caller's
// trace: the logs' trace_id, and what the service propagates.
func TestHTTPNotRecorded(t *testing.T) {
	t.Parallel()
	tp := provider(t, OTel{Exporter: ExporterNone}, "api", nil)
	var seen trace.SpanContext
	var recording bool
	r := chi.NewRouter()
	r.Use(Middleware(tp))
	r.Get("/v1/x", func(w http.ResponseWriter, r *http.Request) {
		seen, recording = trace.SpanContextFromContext(r.Context()), trace.SpanFromContext(r.Context()).IsRecording()
	})
	req := httptest.NewRequest(http.MethodGet, "/v1/x", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r.ServeHTTP(httptest.NewRecorder(), req)
	if !seen.IsValid() || recording || seen.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || seen.SpanID().String() == "00f067aa0ba902b7" {
		t.Fatalf("handler's span %v (recording %v), want a valid unrecorded child in the caller's trace", seen, recording)
	}
}

// TestInboundBounded: a request with a huge baggage, an overlong
// traceparent or an overlong tracestate is served as any other. Its
// baggage reaches nothing downstream: not the handler's context, not the
// calls it makes (Transport), not what a job's metadata gets (Propagator, as
// the outbox injects it). An overlong traceparent is ignored, the request
// starting a trace of its own; an overlong tracestate is dropped.
func TestInboundBounded(t *testing.T) {
	t.Parallel()
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent  = "00-" + traceID + "-00f067aa0ba902b7-01"
		marker  = "client-chose-this"
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	// downstream records the headers of the calls the handler makes.
	var mu sync.Mutex
	var downstreamHeaders []http.Header
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		downstreamHeaders = append(downstreamHeaders, r.Header.Clone())
		mu.Unlock()
	}))
	defer downstream.Close()
	client := &http.Client{Transport: Transport(nil, tp)}
	defer client.CloseIdleConnections()

	// The handler reports its trace, its baggage and what a job inserted
	// now would carry, after calling downstream.
	type seen struct {
		trace    trace.SpanContext
		baggage  int
		metadata propagation.MapCarrier
	}
	seenCh := make(chan seen, 1)
	r := chi.NewRouter()
	r.Use(Middleware(tp))
	r.Get("/v1/x", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		res, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		res.Body.Close()
		metadata := propagation.MapCarrier{}
		Propagator.Inject(r.Context(), metadata)
		seenCh <- seen{trace.SpanContextFromContext(r.Context()), baggage.FromContext(r.Context()).Len(), metadata}
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	front := &http.Client{}
	defer front.CloseIdleConnections()

	hugeBaggage := "k0=" + marker
	for i := 1; len(hugeBaggage) < 64<<10; i++ {
		hugeBaggage += fmt.Sprintf(",k%d=%s", i, marker)
	}
	// Three members of a valid tracestate, each short enough to parse.
	longState := "a=" + strings.Repeat("x", 200) + ",b=" + strings.Repeat("y", 200) + ",c=" + strings.Repeat("z", 200)
	for _, tt := range []struct {
		name      string
		headers   [][2]string
		keepTrace bool   // the handler's span is in traceID's trace
		state     string // the tracestate sent on
	}{
		{"HugeBaggage", [][2]string{{"traceparent", parent}, {"baggage", hugeBaggage}}, true, ""},
		{"SmallBaggage", [][2]string{{"traceparent", parent}, {"baggage", "k=" + marker}}, true, ""},
		{"BaggageAlone", [][2]string{{"baggage", "k=" + marker}}, false, ""},
		{"TraceState", [][2]string{{"traceparent", parent}, {"tracestate", "vendor=" + marker}}, true, "vendor=" + marker},
		{"LongTraceState", [][2]string{{"traceparent", parent}, {"tracestate", longState}}, true, ""},
		// Version 01 may carry fields after the flags, which the SDK
		// accepts: past W3C's 55 bytes, it is ignored.
		{"LongTraceparent", [][2]string{{"traceparent", "01-" + traceID + "-00f067aa0ba902b7-01-" + strings.Repeat(marker, 500)}}, false, ""},
		{"TwoTraceparents", [][2]string{{"traceparent", parent}, {"traceparent", parent}}, false, ""},
		{"OddTraceparent", [][2]string{{"traceparent", strings.Repeat("-", 4000)}, {"baggage", hugeBaggage}}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			downstreamHeaders = nil
			mu.Unlock()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/x", nil)
			for _, h := range tt.headers {
				req.Header.Add(h[0], h[1])
			}
			res, err := front.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want the request served", res.StatusCode)
			}
			got := <-seenCh
			if !got.trace.IsValid() || (got.trace.TraceID().String() == traceID) != tt.keepTrace {
				t.Errorf("handler's trace %s; caller's trace %s kept: want %v", got.trace.TraceID(), traceID, tt.keepTrace)
			}
			if got.baggage != 0 {
				t.Errorf("the handler's context holds %d baggage members", got.baggage)
			}
			if _, ok := got.metadata["baggage"]; ok || len(got.metadata) > 2 || got.metadata["tracestate"] != tt.state {
				t.Errorf("job metadata would be %.200v; want traceparent and tracestate %q only", got.metadata, tt.state)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(downstreamHeaders) != 1 {
				t.Fatalf("%d downstream calls", len(downstreamHeaders))
			}
			h := downstreamHeaders[0]
			if h.Get("baggage") != "" || h.Get("tracestate") != tt.state || !strings.Contains(h.Get("traceparent"), got.trace.TraceID().String()) {
				t.Errorf("downstream got traceparent %q, tracestate %.100q, baggage %.100q; want the handler's trace, tracestate %q, no baggage",
					h.Get("traceparent"), h.Get("tracestate"), h.Get("baggage"), tt.state)
			}
			for name, values := range h {
				if strings.Contains(strings.Join(values, ","), marker) && (tt.state == "" || name != "Tracestate") {
					t.Errorf("downstream header %s carries what the client sent", name)
				}
			}
		})
	}
}

// provider is NewProvider's provider of cfg for service, which must not
// fail.
func provider(t *testing.T, cfg OTel, service string, console io.Writer) *sdktrace.TracerProvider {
	t.Helper()
	tp, err := NewProvider(context.Background(), cfg, service, console)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// shutdown shuts tp down, which flushes the spans it batches, and must not
// fail.
func shutdown(t *testing.T, tp *sdktrace.TracerProvider) {
	t.Helper()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// oneSpan starts and ends a span named name on tp, then shuts tp down, so
// that the span is exported; it returns the span.
func oneSpan(t *testing.T, tp *sdktrace.TracerProvider, name string) trace.Span {
	t.Helper()
	_, span := tp.Tracer("test").Start(context.Background(), name)
	span.End()
	shutdown(t, tp)
	return span
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}
