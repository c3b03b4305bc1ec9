// Package otlptest is an OTLP trace receiver for tests: a collector's
// trace service, over gRPC or over HTTP/protobuf, on a loopback port,
// keeping every span it is sent with its resource, so that a test asserts
// what an exporter really put on the wire.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a span as a receiver got it.
type Span struct {
	Name    string
	TraceID string
	// Resource and Attributes hold the string values of the resource's and
	// the span's attributes.
	Resource, Attributes map[string]string
	// Protocol is how it came: "grpc" or "http/protobuf".
	Protocol string
}

// Receiver is an OTLP trace receiver; Endpoint is the URL to give an
// exporter (OTEL_EXPORTER_OTLP_ENDPOINT).
type Receiver struct {
	Endpoint string

	mu    sync.Mutex
	spans []Span
}

// Spans returns what the receiver got so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Find returns the first span named name, if one came.
func (r *Receiver) Find(name string) (Span, bool) {
	for _, s := range r.Spans() {
		if s.Name == name {
			return s, true
		}
	}
	return Span{}, false
}

func (r *Receiver) add(req *collectortrace.ExportTraceServiceRequest, protocol string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
				}
				r.spans = append(r.spans, Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					Resource: res, Attributes: attrs, Protocol: protocol})
			}
		}
	}
}

// GRPC starts a receiver of OTLP over gRPC (insecure), stopped when t ends.
func GRPC(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcService{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return r
}

// grpcService is the collector's trace service.
type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s grpcService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.r.add(req, "grpc")
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// HTTP starts a receiver of OTLP over HTTP/protobuf at /v1/traces, stopped
// when t ends. Anything else (JSON, another path) is refused.
func HTTP(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export collectortrace.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" ||
			proto.Unmarshal(body, &export) != nil {
			http.Error(w, "not OTLP/HTTP protobuf traces", http.StatusBadRequest)
			return
		}
		r.add(&export, "http/protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}
