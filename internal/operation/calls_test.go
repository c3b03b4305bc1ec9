package operation_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/testkind"
)

// timing is a call a CallTimer was told of: its name and outcome.
type timing struct{ call, outcome string }

// timings records the calls a timed registry's kinds make (an
// operation.CallTimer), and the trace id of each call's context.
type timings struct {
	mu     sync.Mutex
	calls  map[timing]int
	traces map[timing]string
}

// Called implements operation.CallTimer.
func (r *timings) Called(ctx context.Context, call, outcome string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		panic("a call timed negative")
	}
	t := timing{call, outcome}
	r.calls[t]++
	r.traces[t] = trace.SpanContextFromContext(ctx).TraceID().String()
}

// took reports the calls timed since the last took, and their trace ids.
func (r *timings) took() (map[timing]int, map[timing]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls, traces := r.calls, r.traces
	r.calls, r.traces = map[timing]int{}, map[timing]string{}
	return calls, traces
}

// timed times the processor calls of h's kinds from then on, through a
// Timed registry, as the worker's are.
func timed(h *harness) *timings {
	timer := &timings{calls: map[timing]int{}, traces: map[timing]string{}}
	h.ops.Kinds = h.ops.Kinds.Timed(timer)
	h.svc.Kinds = h.ops.Kinds
	return timer
}

// tookExactly fails t unless the calls timed since the last look are want.
func tookExactly(t *testing.T, timer *timings, want map[timing]int) map[timing]string {
	t.Helper()
	got, traces := timer.took()
	if !maps.Equal(got, want) {
		t.Fatalf("timed %v, want %v", got, want)
	}
	return traces
}

// settled marks the operation id of kind and settles it as the reconciler
// does, without the ledgers' comparison.
func settled(t *testing.T, h *harness, kind, id string) {
	t.Helper()
	h.mark(kind, id)
	if r, err := h.rec.Settle(t.Context()); err != nil || r.Settled != 1 {
		t.Fatalf("settle: %+v, %v", r, err)
	}
}

// spanned is a context with a span context, as a job's is, and its trace id.
func spanned() (context.Context, string) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xca, 0x11}, SpanID: trace.SpanID{1}})
	return trace.ContextWithSpanContext(context.Background(), sc), sc.TraceID().String()
}

// TestTimed: a Timed registry times every processor call the machinery
// makes through its kinds, the widget's (a kind no list names) as well as
// the payment's, each under its name derived from the kind's processor
// object and with its outcome, in the call's own context; its kinds are
// found as the registry's were.
func TestTimed(t *testing.T) {
	t.Parallel()
	gadget := testkind.Names.CallNames()
	charge := payments.Names.CallNames()

	onWidgets(t, "TheWorkersCallInItsContext", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		timer := timed(h)
		ctx, traceID := spanned()
		id := h.widget(100)
		if err := h.ops.Run(ctx, testkind.Names.Type, id, 1); err != nil {
			t.Fatal(err)
		}
		p := h.pay("pm_card_visa")
		if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1); err != nil {
			t.Fatal(err)
		}
		traces := tookExactly(t, timer, map[timing]int{{gadget.Make, operation.CallOK}: 1, {charge.Make, operation.CallOK}: 1})
		for call, id := range traces {
			if id != traceID {
				t.Errorf("%v timed in trace %s, want the job's %s", call, id, traceID)
			}
		}
	})

	onWidgets(t, "UnknownThenReconciled", func(t *testing.T, h *harness, gadgets *testkind.Processor, _ *notified) {
		timer := timed(h)
		id := h.widget(100)
		gadgets.SetUnknown(true)
		if err := h.ops.Run(t.Context(), testkind.Names.Type, id, 1); !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("run: %v, want an unknown outcome", err)
		}
		tookExactly(t, timer, map[timing]int{{gadget.Make, operation.CallUnknown}: 1})
		gadgets.SetUnknown(false)
		settled(t, h, testkind.Names.Type, id)
		// Nothing was made: the reconciler asks, then makes it.
		tookExactly(t, timer, map[timing]int{{gadget.Find, operation.CallOK}: 1, {gadget.Make, operation.CallOK}: 1})
	})

	onWidgets(t, "TheFenceThenAClosedKey", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		timer := timed(h)
		id := h.widget(100)
		h.overdue("widgets", id)
		settled(t, h, testkind.Names.Type, id)
		tookExactly(t, timer, map[timing]int{{gadget.Find, operation.CallOK}: 1, {gadget.Close, operation.CallOK}: 1})
		k, err := h.ops.Kinds.Kind(testkind.Names.Type)
		if err != nil {
			t.Fatal(err)
		}
		p, err := operation.Load(t.Context(), h.db.Pool, k, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Make(t.Context()); !errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("make on a closed key: %v", err)
		}
		tookExactly(t, timer, map[timing]int{{gadget.Make, operation.CallError}: 1})
	})

	onWidgets(t, "TheLedgers", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		timer := timed(h)
		if _, err := h.rec.CompareLedger(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := map[timing]int{}
		for _, k := range h.ops.Kinds.Kinds() {
			want[timing{k.Names().CallNames().Ledger, operation.CallOK}] = 1
		}
		tookExactly(t, timer, want)
	})

	onWidgets(t, "KindsFoundAsBefore", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		timer := timed(h)
		untimed := operation.MustRegistry(payments.New(nil), refunds.New(nil), testkind.New(nil))
		if got, want := h.ops.Kinds.Types(), untimed.Types(); !slices.Equal(got, want) {
			t.Fatalf("types %v, want %v", got, want)
		}
		var calls []string
		for _, k := range untimed.Kinds() {
			calls = append(calls, k.Names().CallNames().All()...)
		}
		if got := h.ops.Kinds.Calls(); !slices.Equal(got, calls) || !slices.Equal(untimed.Calls(), calls) {
			t.Fatalf("calls %v, want %v", got, calls)
		}
		byType, err := h.ops.Kinds.Kind(testkind.Names.Type)
		if err != nil || byType.Names() != testkind.Names {
			t.Fatalf("by type: %v, %v", byType, err)
		}
		byKey, id, ok := h.ops.Kinds.ByDownstreamKey(testkind.Names.DownstreamKey("wid_000000000000000000000000"))
		if !ok || id != "wid_000000000000000000000000" || byKey.Names() != testkind.Names {
			t.Fatalf("by downstream key: %v, %s, %t", byKey, id, ok)
		}
		w := h.widget(10)
		for _, k := range []operation.Kind{byType, byKey} {
			p, err := operation.Load(t.Context(), h.db.Pool, k, w, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if _, found, err := p.Find(t.Context()); err != nil || found {
				t.Fatalf("find: %t, %v", found, err)
			}
		}
		tookExactly(t, timer, map[timing]int{{gadget.Find, operation.CallOK}: 2})
	})
}
