package tracing

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestExporters: each value of OTEL_TRACES_EXPORTER, and an unknown one
// refused with the variable named.
func TestExporters(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "none", "console", "otlp", "otlp,console", " console , none "} {
		if err := (OTel{Exporter: ok}).Validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"jaeger", "zipkin", "console,stdout"} {
		err := (OTel{Exporter: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("%q: %v, want an error naming OTEL_TRACES_EXPORTER", bad, err)
		}
		if _, err := NewProvider(context.Background(), OTel{Exporter: bad}, "api", nil); err == nil {
			t.Errorf("%q: NewProvider made a provider", bad)
		}
	}
}

// TestNoneHasTraceIDs: with no exporter, spans still have valid ids, for
// the logs, and the service name is the program's unless OTEL_SERVICE_NAME
// names another.
func TestNoneHasTraceIDs(t *testing.T) {
	t.Parallel()
	tp, err := NewProvider(context.Background(), OTel{Exporter: "none"}, "worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "op")
	if !span.SpanContext().IsValid() {
		t.Fatal("no valid span context without an exporter")
	}
	if span.IsRecording() {
		t.Error("a span is recorded with nothing to export it to")
	}
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The service name, on exported spans.
	for _, tt := range []struct{ cfg, want string }{{"", "worker"}, {"payments-worker", "payments-worker"}} {
		var out bytes.Buffer
		tp, err := NewProvider(context.Background(), OTel{Exporter: "console", ServiceName: tt.cfg}, "worker", &out)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "op")
		span.End()
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
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
	tp, err := NewProvider(context.Background(), OTel{Exporter: "console"}, "api", &out)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "console-span")
	span.End()
	if !strings.Contains(out.String(), span.SpanContext().TraceID().String()) || !strings.Contains(out.String(), "console-span") {
		t.Fatalf("console output %q lacks the span", out.String())
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
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
	srv := httptest.NewServer(r)
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil, tp)}
	defer client.CloseIdleConnections()

	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	for _, path := range []string{"/v1/payments/pay_123", "/healthz"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	parent.End()

	var server sdktrace.ReadOnlySpan
	servers := 0
	for _, s := range rec.Ended() {
		if s.SpanKind().String() == "server" {
			server = s
			servers++
		}
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %q in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), parent.SpanContext().TraceID())
		}
	}
	if servers != 1 {
		t.Fatalf("%d server spans, want 1 (none for /healthz)", servers)
	}
	if server.Name() != "GET /v1/payments/{id}" {
		t.Errorf("server span named %q", server.Name())
	}
	if !hasAttr(server.Attributes(), attribute.String("http.route", "/v1/payments/{id}")) {
		t.Errorf("server span attributes %v lack http.route", server.Attributes())
	}
	if server.Parent().SpanID() == parent.SpanContext().SpanID() || !server.Parent().IsRemote() {
		t.Errorf("server span's parent %v is not the remote client span", server.Parent())
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}
