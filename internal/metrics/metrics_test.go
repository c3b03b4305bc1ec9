package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/metrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// traced is a context whose span context has trace id b repeated.
func traced(b byte) (context.Context, string) {
	var tid trace.TraceID
	for i := range tid {
		tid[i] = b
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}})
	return trace.ContextWithSpanContext(context.Background(), sc), tid.String()
}

// exemplars are the trace ids of the exemplars of name's one series, by
// bucket bound.
func exemplars(t *testing.T, reg *prometheus.Registry, name string) (map[float64]string, *dto.Histogram) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		out := map[float64]string{}
		for _, b := range h.GetBucket() {
			for _, l := range b.GetExemplar().GetLabel() {
				if l.GetName() == metrics.TraceIDLabel {
					out[b.GetUpperBound()] = l.GetValue()
				}
			}
		}
		return out, h
	}
	t.Fatalf("no %s gathered", name)
	return nil, nil
}

// TestExemplars: an observation with a span context is its bucket's
// exemplar, one without is counted with none; a busy bucket keeps its
// exemplar for a second while another bucket takes its own at once.
func TestExemplars(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	l := metrics.NewHistogram(reg, "test_duration_seconds", "Test.", "op").With("a")

	l.Observe(context.Background(), 3*time.Millisecond)
	if ex, h := exemplars(t, reg, "test_duration_seconds"); len(ex) != 0 || h.GetSampleCount() != 1 {
		t.Fatalf("no span: exemplars %v, count %d", ex, h.GetSampleCount())
	}
	first, firstID := traced(1)
	second, secondID := traced(2)
	l.Observe(first, 20*time.Second)
	l.Observe(second, 20*time.Second) // within the second: the first stays
	l.Observe(second, 40*time.Millisecond)
	ex, h := exemplars(t, reg, "test_duration_seconds")
	if ex[30] != firstID || ex[0.05] != secondID || len(ex) != 2 {
		t.Fatalf("exemplars %v, want %s on le=30 and %s on le=0.05", ex, firstID, secondID)
	}
	if h.GetSampleCount() != 4 {
		t.Fatalf("count %d, want 4", h.GetSampleCount())
	}
	if b := h.GetBucket(); b[len(b)-1].GetUpperBound() != 60 {
		t.Fatalf("last bucket %v, want 60 s: past the longest wait", b[len(b)-1].GetUpperBound())
	}
}

// TestHandlerOpenMetrics: the handler serves exemplars in OpenMetrics to a
// scraper that asks for it, and the text format to one that does not.
func TestHandlerOpenMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	ctx, id := traced(7)
	metrics.NewHistogram(reg, "test_duration_seconds", "Test.").With().Observe(ctx, 2*time.Second)
	srv := httptest.NewServer(metrics.Handler(reg))
	t.Cleanup(srv.Close)
	for accept, want := range map[string]string{
		"application/openmetrics-text": `test_duration_seconds_bucket{le="2.5"} 1 # {trace_id="` + id + `"} 2`,
		"":                             `test_duration_seconds_bucket{le="2.5"} 1`,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(body), want) || accept == "" && strings.Contains(string(body), "# {") {
			t.Errorf("Accept %q: want %q in\n%s", accept, want, body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
