package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/payments/tools/otlptest"
)

// TestOTelEnvironment runs a binary (the demo receiver, which needs no
// database) configured only by the standard OTEL_* variables, as an
// operator would: OTEL_PROPAGATORS=b3 continues a caller's b3 trace,
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the span over gRPC to the
// endpoint, and OTEL_RESOURCE_ATTRIBUTES's service.name names the service
// instead of the program's name. LOG_LEVEL=warn keeps its info lines out.
func TestOTelEnvironment(t *testing.T) {
	t.Parallel()
	collector := otlptest.GRPC(t)
	addr := freeAddr(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	p := start(t, "demoreceiver", []string{
		"RECEIVER_ADDR=" + addr, "RECEIVER_SECRET=" + demoReceiverSecret,
		"RECEIVER_DEDUPE_FILE=" + filepath.Join(t.TempDir(), "seen.log"), "LOG_LEVEL=warn",
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.Endpoint,
		"OTEL_PROPAGATORS=b3", "OTEL_RESOURCE_ATTRIBUTES=service.name=merchant-receiver,deployment.environment.name=e2e",
		"OTEL_SERVICE_NAME=",
	})
	waitHealthy(t, "http://"+addr+"/healthz", p)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("b3", traceID+"-00f067aa0ba902b7-1")
	client := &http.Client{}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close() // an unsigned delivery, refused: its span is what matters
	// A graceful stop flushes the spans.
	p.stop(t)

	var got []otlptest.Span
	for _, s := range collector.Spans() {
		if s.TraceID == traceID {
			got = append(got, s)
		}
	}
	if len(got) != 1 {
		t.Fatalf("spans in the caller's b3 trace %s: %+v; the collector got %+v", traceID, got, collector.Spans())
	}
	if got[0].Protocol != "grpc" || got[0].Resource["service.name"] != "merchant-receiver" || got[0].Resource["deployment.environment.name"] != "e2e" {
		t.Errorf("span %+v: want it over grpc, service.name merchant-receiver", got[0])
	}
	if out := p.out.String(); strings.Contains(out, `"level":"INFO"`) {
		t.Errorf("LOG_LEVEL=warn wrote info lines:\n%s", out)
	}
}
