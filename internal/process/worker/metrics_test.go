package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/tools/testkind"
)

// series is an operation and outcome's series of the processor calls'
// histogram: how many calls, and the trace id of its last exemplar.
type series struct {
	count    uint64
	exemplar string
}

// callSeries reads the processor calls' histogram from reg, by operation
// and outcome.
func callSeries(t *testing.T, reg *prometheus.Registry) map[[2]string]series {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]series{}
	for _, f := range families {
		if f.GetName() != "payments_processor_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			s := series{count: m.GetHistogram().GetSampleCount()}
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == metrics.TraceIDLabel {
						s.exemplar = l.GetValue()
					}
				}
			}
			out[[2]string{labels["operation"], labels["outcome"]}] = s
		}
	}
	return out
}

// TestTimedCalls: the worker's kinds, with a kind no list names (the
// widget), have every call of every kind a series at zero from the start,
// the payments' and refunds' under the names the alerts and dashboards read;
// a call is timed under its name and outcome, its span's trace id the
// exemplar.
func TestTimedCalls(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	gadgets := testkind.NewProcessor()
	declared := append(catalog.Kinds(fake.New(down.URL, 5*time.Second)).Kinds(), testkind.New(gadgets))
	reg := prometheus.NewRegistry()
	kinds := timedCalls(reg, operation.MustRegistry(declared...))

	want := map[[2]string]series{}
	for _, k := range declared {
		for _, call := range k.Names().CallNames().All() {
			for _, outcome := range operation.CallOutcomes {
				want[[2]string{call, outcome}] = series{}
			}
		}
	}
	if len(want) != len(declared)*4*len(operation.CallOutcomes) {
		t.Fatalf("%d series, want 4 calls × %d outcomes for each of %d kinds: %v", len(want), len(operation.CallOutcomes), len(declared), want)
	}
	for _, call := range []string{"charge", "find_charge", "close_charge", "ledger_charges",
		"refund", "find_refund", "close_refund", "ledger_refunds"} {
		if _, ok := want[[2]string{call, operation.CallOK}]; !ok {
			t.Errorf("no call %s: the alerts and dashboards read it", call)
		}
	}
	check := func(when string) {
		t.Helper()
		got := callSeries(t, reg)
		if len(got) != len(want) {
			t.Fatalf("%s: %d series, want %d: %v", when, len(got), len(want), got)
		}
		for k, s := range want {
			if got[k] != s {
				t.Errorf("%s: %v: %+v, want %+v", when, k, got[k], s)
			}
		}
	}
	check("from the start")

	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{1}})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	payment, err := kinds.Kind("payment")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := payment.LedgerPage(ctx, time.Now().Add(-time.Hour), ""); err == nil {
		t.Fatal("a 503 answered a ledger page")
	}
	widget, _, ok := kinds.ByDownstreamKey(testkind.Names.DownstreamKey("wid_000000000000000000000000"))
	if !ok {
		t.Fatal("no kind of a widget's downstream key")
	}
	if _, _, err := widget.LedgerPage(ctx, time.Now().Add(-time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	gadget, charge := widget.Names().CallNames(), payment.Names().CallNames()
	want[[2]string{charge.Ledger, operation.CallUnknown}] = series{1, sc.TraceID().String()}
	want[[2]string{gadget.Ledger, operation.CallOK}] = series{1, sc.TraceID().String()}
	check("after two calls")
}
