package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/gateway"
)

// call is an operation and outcome's series of the calls' histogram: how
// many calls, and the trace id of its last exemplar.
type call struct {
	count    uint64
	exemplar string
}

// calls reads the calls' histogram from reg, by operation and outcome.
func calls(t *testing.T, reg *prometheus.Registry) map[[2]string]call {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]call{}
	for _, f := range families {
		if f.GetName() != "payments_processor_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			c := call{count: m.GetHistogram().GetSampleCount()}
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					c.exemplar = l.GetValue()
				}
			}
			out[[2]string{labels["operation"], labels["outcome"]}] = c
		}
	}
	return out
}

// TestMetered: every operation and outcome is a series from the start; a
// call is timed under its operation and outcome, its span's trace id the
// exemplar.
func TestMetered(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{1}})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	reg := prometheus.NewRegistry()
	client := newClient(t).Metered(reg)
	if _, err := client.Charge(ctx, chargeReq("metered", "pm_card_declined")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.FindRefund(ctx, "none"); err != nil {
		t.Fatal(err)
	}
	got := calls(t, reg)
	if len(got) != 8*3 {
		t.Fatalf("%d series, want 8 operations × 3 outcomes: %v", len(got), got)
	}
	for k, c := range got {
		want := call{}
		if k == [2]string{"charge", "ok"} || k == [2]string{"find_refund", "ok"} {
			want = call{1, sc.TraceID().String()} // a decline is a definite answer
		}
		if c != want {
			t.Errorf("%v: %+v, want %+v", k, c, want)
		}
	}

	reg = prometheus.NewRegistry()
	down := gateway.New(fakeProcessor(t, http.StatusServiceUnavailable, `{}`, "k"), 5*time.Second).Metered(reg)
	if _, err := down.Charge(ctx, chargeReq("k", "pm_card_visa")); err == nil {
		t.Fatal("a 503 answered a charge")
	}
	if c := calls(t, reg)[[2]string{"charge", "unknown_outcome"}]; c.count != 1 {
		t.Fatalf("charges with an unknown outcome after a 503: %d, want 1", c.count)
	}
}
