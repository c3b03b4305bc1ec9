package operation_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/testkind"
)

// notified records the events the finishing phases stage.
type notified struct {
	mu     sync.Mutex
	events []string
}

// Notify implements operation.Subscribers.
func (n *notified) Notify(_ *database.Tx, _, _, eventType string) func(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, eventType)
	return func(context.Context) error { return nil }
}

func (n *notified) has(eventType string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.events, eventType)
}

// widgetHarness is the harness with a third kind, the widget, which only
// this test declares (package testkind): its table made as a forker's
// migration would make it, its processor in memory.
func widgetHarness(t *testing.T) (*harness, *testkind.Processor, *notified) {
	t.Helper()
	gadgets := testkind.NewProcessor()
	h := newHarnessOf(t, func(p *fakeProcessor) *operation.Registry {
		return operation.MustRegistry(payments.New(p), refunds.New(p), testkind.New(gadgets))
	})
	if err := testkind.Migrate(context.Background(), h.db.Pool); err != nil {
		t.Fatal(err)
	}
	subscribers := &notified{}
	h.ops.Subscribers = subscribers
	return h, gadgets, subscribers
}

// receiveGadgetEvent records the processor's event evID about widget id's
// gadget, saying out.
func (h *harness) receiveGadgetEvent(id, evID string, out operation.Outcome) {
	h.t.Helper()
	ev := operation.ProcessorEvent{ID: evID, Type: "gadget.answered", DownstreamKey: testkind.Names.DownstreamKey(id),
		Outcome: out, Amount: testkind.QueuedAmount, Currency: "USD", Payload: []byte(`{}`)}
	if result, err := h.svc.ReceiveProcessorEvent(h.t.Context(), ev); err != nil || result != operation.EventAccepted {
		h.t.Fatalf("receive %s: %s, %v", evID, result, err)
	}
}

// gadgetEvent records and processes the processor's event evID about
// widget id's gadget, saying out, and returns what processing found.
func (h *harness) gadgetEvent(id, evID string, out operation.Outcome) string {
	h.t.Helper()
	h.receiveGadgetEvent(id, evID, out)
	result, err := h.ops.SettleFromEvent(h.t.Context(), evID)
	if err != nil {
		h.t.Fatalf("settle %s: %v", evID, err)
	}
	return result
}

// onWidgets runs body as the parallel subtest name of t, on a widget
// harness of its own.
func onWidgets(t *testing.T, name string, body func(t *testing.T, h *harness, gadgets *testkind.Processor, events *notified)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		h, gadgets, events := widgetHarness(t)
		body(t, h, gadgets, events)
	})
}

// widget starts a widget of amount, as its first phase does, and returns
// its id.
func (h *harness) widget(amount int64) string {
	h.t.Helper()
	lease, err := testkind.Create(context.Background(), h.svc, h.request(testkind.Names.Path), amount)
	if err != nil || !lease.Created {
		h.t.Fatalf("create a widget: %+v, %v", lease, err)
	}
	h.relayed()
	return lease.Key.Resource.ID
}

// TestAKindNoListNames runs the widget, a kind declared in a test alone,
// through everything generic, as a forker's new kind is run: what each
// subtest proves was a place that named payments and refunds, or read any
// other kind as one of them, before an operation was declared once.
func TestAKindNoListNames(t *testing.T) {
	t.Parallel()

	onWidgets(t, "FirstPhaseAndReplay", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		req := h.request(testkind.Names.Path)
		lease, err := testkind.Create(t.Context(), h.svc, req, 100)
		if err != nil || !lease.Created || lease.Key.Resource.Type != testkind.Names.Type {
			t.Fatalf("first: %+v, %v", lease, err)
		}
		id := lease.Key.Resource.ID
		h.relayed()
		if n := h.count(`SELECT count(*) FROM idempotency_keys WHERE resource_id = $1 AND job_id = $2`, id, h.jobs.job(id)); n != 1 {
			t.Fatal("the key does not name the job staged for the widget")
		}
		again, err := testkind.Create(t.Context(), h.svc, req, 100)
		if err != nil || again.Created || again.Key.ID != lease.Key.ID {
			t.Fatalf("retry: %+v, %v", again, err)
		}
		if n := h.count(`SELECT count(*) FROM widgets`); n != 1 {
			t.Fatalf("widgets = %d, want 1", n)
		}
	})

	// A kind names only its own columns: one the machinery writes, or a
	// name that is no column's, is refused before anything is sent.
	onWidgets(t, "OnlyItsOwnColumns", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		for _, column := range []string{"status", "tenant_id", "processor_gadget_id", "colour; DROP TABLE widgets"} {
			_, err := h.svc.Start(t.Context(), h.request(testkind.Names.Path), operation.Steps{Plan: func(context.Context, pgx.Tx) (operation.Plan, error) {
				return operation.Plan{Resource: idempotency.ResourceRef{Type: testkind.Names.Type, ID: operation.NewID(testkind.Names.Prefix)},
					Operation: &operation.Row{Amount: 100, Currency: "USD", Columns: []operation.Column{{Name: column, Value: "x"}}}}, nil
			}})
			if err == nil || !strings.Contains(err.Error(), "is not one of its own") {
				t.Errorf("a widget writing column %q: %v, want it refused", column, err)
			}
		}
		if n := h.count(`SELECT (SELECT count(*) FROM widgets) + (SELECT count(*) FROM idempotency_keys)`); n != 0 {
			t.Fatalf("%d rows written by refused first phases", n)
		}
	})

	onWidgets(t, "RefusalStored", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		lease, err := testkind.Create(t.Context(), h.svc, h.request(testkind.Names.Path), 2000)
		if err != nil || !lease.Key.Finished() || lease.Key.Response.Status != http.StatusBadRequest {
			t.Fatalf("refusal: %+v, %v", lease, err)
		}
		if n := h.count(`SELECT count(*) FROM widgets`); n != 0 {
			t.Fatalf("widgets = %d after a refusal", n)
		}
	})

	onWidgets(t, "WorkerSettles", func(t *testing.T, h *harness, gadgets *testkind.Processor, events *notified) {
		id := h.widget(100)
		h.run(testkind.Names.Type, id)
		key, err := h.svc.Keys.GetByID(t.Context(), h.db.Pool, int64(h.count(`SELECT idempotency_key_id FROM widgets WHERE id = $1`, id)))
		if err != nil || !key.Finished() || key.Response.Status != http.StatusCreated ||
			key.Response.Header["Location"] != "/v1/widgets/"+id {
			t.Fatalf("key = %+v, %v", key, err)
		}
		if gadgets.Made() != 1 || !events.has("widget.made") {
			t.Fatalf("gadgets %d, events %v", gadgets.Made(), events.events)
		}
		if n := h.count(`SELECT count(*) FROM events WHERE type = 'widget.made' AND resource_id = $1`, id); n != 1 {
			t.Fatalf("widget.made events = %d", n)
		}
	})

	// The processor's answer names a state of the widget's own, one that
	// waits: it is recorded, answered and announced as the widget declares
	// it; the processor's webhook then moves the widget on, with the new
	// state's event, and the key's answer stays the first.
	onWidgets(t, "AWaitingStateMovesOn", func(t *testing.T, h *harness, _ *testkind.Processor, events *notified) {
		id := h.widget(testkind.QueuedAmount)
		h.run(testkind.Names.Type, id)
		keyID := int64(h.count(`SELECT idempotency_key_id FROM widgets WHERE id = $1`, id))
		key, err := h.svc.Keys.GetByID(t.Context(), h.db.Pool, keyID)
		if err != nil || !key.Finished() || key.Response.Status != http.StatusAccepted {
			t.Fatalf("key = %+v, %v: want the 202 the queued state answers", key, err)
		}
		if h.count(`SELECT count(*) FROM widgets WHERE id = $1 AND status = 'queued'`, id) != 1 || !events.has("widget.queued") {
			t.Fatalf("the widget is not queued, or no widget.queued event: %v", events.events)
		}
		gadget := testkind.GadgetID(id)
		if result := h.gadgetEvent(id, "evt_made", operation.Outcome{ID: gadget, Succeeded: true}); result != operation.EventSettled {
			t.Fatalf("the webhook that says made: %s", result)
		}
		if h.count(`SELECT count(*) FROM widgets WHERE id = $1 AND status = 'made' AND settled_by = 'webhook'`, id) != 1 || !events.has("widget.made") ||
			h.count(`SELECT count(*) FROM events WHERE resource_id = $1`, id) != 2 {
			t.Fatalf("the widget did not move on to made with its event: %v", events.events)
		}
		if again, err := h.svc.Keys.GetByID(t.Context(), h.db.Pool, keyID); err != nil || !bytes.Equal(again.Response.Body, key.Response.Body) {
			t.Fatalf("the key's answer changed: %+v, %v", again, err)
		}
		// Made is final: another answer moves nothing.
		if result := h.gadgetEvent(id, "evt_failed", operation.Outcome{ID: gadget}); result != operation.EventContradiction {
			t.Fatalf("a later failure of a made widget: %s, want a contradiction", result)
		}
	})

	// Two answers of the processor race to move a waiting widget on: the
	// operation's lock lets one, and the other finds it moved.
	onWidgets(t, "TwoAnswersRace", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		id := h.widget(testkind.QueuedAmount)
		h.run(testkind.Names.Type, id)
		gadget := testkind.GadgetID(id)
		answers := map[string]operation.Outcome{"evt_made": {ID: gadget, Succeeded: true}, "evt_failed": {ID: gadget}}
		results := make(chan string, len(answers))
		var wg sync.WaitGroup
		for evID, out := range answers {
			h.receiveGadgetEvent(id, evID, out)
			wg.Go(func() {
				result, err := h.ops.SettleFromEvent(t.Context(), evID)
				if err != nil {
					t.Error(err)
				}
				results <- result
			})
		}
		wg.Wait()
		close(results)
		var got []string
		for r := range results {
			got = append(got, r)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{operation.EventContradiction, operation.EventSettled}) {
			t.Fatalf("results %v: want one settled, one contradiction", got)
		}
		if n := h.count(`SELECT count(*) FROM events WHERE resource_id = $1 AND type IN ('widget.made', 'widget.failed')`, id); n != 1 {
			t.Fatalf("%d events of a final state, want 1", n)
		}
	})

	// A status the kind does not declare (its table admits one its
	// declaration lacks) is an error wherever it is read, never a failure:
	// not a contradiction of the processor's event, not a 402.
	// The processor's webhook names the state it reports, and the event
	// keeps it: a webhook that says queued, before any call, settles the
	// widget queued, answering 202, not in the first state that succeeded.
	onWidgets(t, "AnEventKeepsItsState", func(t *testing.T, h *harness, _ *testkind.Processor, events *notified) {
		id := h.widget(testkind.QueuedAmount)
		queued := operation.Outcome{ID: testkind.GadgetID(id), Succeeded: true, Status: "queued"}
		if result := h.gadgetEvent(id, "evt_queued", queued); result != operation.EventSettled {
			t.Fatalf("the webhook that says queued: %s", result)
		}
		if h.count(`SELECT count(*) FROM widgets WHERE id = $1 AND status = 'queued' AND settled_by = 'webhook'`, id) != 1 ||
			!events.has("widget.queued") {
			t.Fatalf("the widget is not queued by the webhook: %v", events.events)
		}
		keyID := int64(h.count(`SELECT idempotency_key_id FROM widgets WHERE id = $1`, id))
		if key, err := h.svc.Keys.GetByID(t.Context(), h.db.Pool, keyID); err != nil || key.Response.Status != http.StatusAccepted {
			t.Fatalf("key = %+v, %v: want the 202 the queued state answers", key, err)
		}
		// A state the kind does not declare, or one that contradicts the
		// outcome, is refused as malformed, and nothing is recorded.
		for _, out := range []operation.Outcome{{ID: "gad_2", Succeeded: true, Status: "melted"}, {ID: "gad_2", Status: "queued"}} {
			ev := operation.ProcessorEvent{ID: "evt_" + out.Status, Type: "gadget.answered", DownstreamKey: testkind.Names.DownstreamKey(id),
				Outcome: out, Amount: testkind.QueuedAmount, Currency: "USD", Payload: []byte(`{}`)}
			if _, err := h.svc.ReceiveProcessorEvent(t.Context(), ev); !errors.Is(err, operation.ErrEventMalformed) {
				t.Errorf("an event in state %s, succeeded %t: %v, want malformed", out.Status, out.Succeeded, err)
			}
		}
		if n := h.count(`SELECT count(*) FROM processor_events WHERE id <> 'evt_queued'`); n != 0 {
			t.Fatalf("%d refused events recorded", n)
		}
	})

	onWidgets(t, "AnUndeclaredStatusIsAnError", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		id := h.widget(100)
		h.exec(`ALTER TABLE widgets DROP CONSTRAINT widgets_status_check`)
		h.exec(`UPDATE widgets SET status = 'melted', processor_gadget_id = 'gad_1' WHERE id = $1`, id)
		ev := operation.ProcessorEvent{ID: "evt_melted", Type: "gadget.succeeded", DownstreamKey: testkind.Names.DownstreamKey(id),
			Outcome: operation.Outcome{ID: "gad_1", Succeeded: true}, Amount: 100, Currency: "USD", Payload: []byte(`{}`)}
		if _, err := h.svc.ReceiveProcessorEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		if result, err := h.ops.SettleFromEvent(t.Context(), ev.ID); err == nil {
			t.Fatalf("an event about a widget in an undeclared status: %s, want an error", result)
		}
		if n := h.count(`SELECT count(*) FROM needs_review`); n != 0 {
			t.Fatalf("%d review cases: the undeclared status was read as an outcome", n)
		}
		tx, err := h.db.Pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(t.Context()) //nolint:errcheck // read only
		if final, err := testkind.New(nil).Final(t.Context(), tx, id); err == nil {
			t.Fatalf("the widget in an undeclared status renders %d", final.Response.Status)
		}
	})

	onWidgets(t, "UnknownOutcomeReconciled", func(t *testing.T, h *harness, gadgets *testkind.Processor, _ *notified) {
		id := h.widget(100)
		gadgets.SetUnknown(true)
		for attempt := 1; attempt < h.ops.MaxAttempts; attempt++ {
			if err := h.ops.Run(t.Context(), testkind.Names.Type, id, attempt); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
		}
		if err := h.ops.Run(t.Context(), testkind.Names.Type, id, h.ops.MaxAttempts); !errors.Is(err, operation.ErrHandedToReconciler) {
			t.Fatalf("last attempt: %v", err)
		}
		if !h.marked(id) {
			t.Fatal("the widget was not handed to the reconciler")
		}
		gadgets.SetUnknown(false)
		if r, err := h.rec.Run(t.Context()); err != nil || r.Settled != 1 {
			t.Fatalf("reconcile: %+v, %v", r, err)
		}
		if h.marked(id) || gadgets.Made() != 1 || h.point(id) != idempotency.RecoveryFinished {
			t.Fatalf("marked %t, gadgets %d, point %s", h.marked(id), gadgets.Made(), h.point(id))
		}
	})

	onWidgets(t, "GivenUpThroughTheFence", func(t *testing.T, h *harness, gadgets *testkind.Processor, events *notified) {
		id := h.widget(100)
		h.overdue("widgets", id)
		if r := h.reconciled(testkind.Names.Type, id); r.Settled != 1 {
			t.Fatalf("reconcile: %+v", r)
		}
		if gadgets.Made() != 0 || !events.has("widget.failed") {
			t.Fatalf("gadgets %d, events %v", gadgets.Made(), events.events)
		}
		if n := h.count(`SELECT count(*) FROM needs_review WHERE kind = 'widget_given_up' AND reference = $1`, id); n != 1 {
			t.Fatal("no widget_given_up case")
		}
		if !slices.Contains(h.ops.Kinds.ReviewKinds(), "widget_given_up") || !slices.Contains(h.ops.Kinds.ReviewKinds(), "made_after_failure") {
			t.Fatalf("review kinds %v lack the widget's", h.ops.Kinds.ReviewKinds())
		}
	})

	onWidgets(t, "SweptAndCountedWhileItsJobIsDead", func(t *testing.T, h *harness, _ *testkind.Processor, _ *notified) {
		id := h.widget(100)
		h.exec(`UPDATE idempotency_keys SET updated_at = now() - interval '1 hour', created_at = now() - interval '1 hour'
			WHERE resource_id = $1`, id)
		oldest, _, err := operation.Backlog(t.Context(), h.db.Pool)
		if err != nil || oldest < 59*time.Minute {
			t.Fatalf("oldest unsettled = %s, %v: the widget is not counted", oldest, err)
		}
		s := &operation.Sweeper{DB: h.db.Pool, Jobs: liveJobs{}, StuckAfter: time.Minute, BatchSize: 10}
		if n, err := s.Sweep(t.Context()); err != nil || n != 1 || !h.marked(id) {
			t.Fatalf("swept %d, %v; marked %t", n, err, h.marked(id))
		}
	})

	onWidgets(t, "ProcessorEventSettles", func(t *testing.T, h *harness, _ *testkind.Processor, events *notified) {
		id := h.widget(100)
		ev := operation.ProcessorEvent{ID: "evt_widget", Type: "gadget.succeeded", DownstreamKey: testkind.Names.DownstreamKey(id),
			Outcome: operation.Outcome{ID: "gad_1", Succeeded: true}, Amount: 100, Currency: "USD", Payload: []byte(`{}`)}
		if result, err := h.svc.ReceiveProcessorEvent(t.Context(), ev); err != nil || result != operation.EventAccepted {
			t.Fatalf("receive: %s, %v: the widget's event was not taken as its own", result, err)
		}
		if result, err := h.ops.SettleFromEvent(t.Context(), ev.ID); err != nil || result != operation.EventSettled {
			t.Fatalf("settle: %s, %v", result, err)
		}
		if !events.has("widget.made") || h.count(`SELECT count(*) FROM widgets WHERE id = $1 AND settled_by = 'webhook'`, id) != 1 {
			t.Fatal("the event did not settle the widget")
		}
	})

	// The harness declares payments and refunds only.
	onHarness(t, "UndeclaredIsAnError", func(t *testing.T, h *harness) {
		if err := h.ops.Run(t.Context(), testkind.Names.Type, "wid_000000000000000000000000", 1); err == nil {
			t.Fatal("a job of an undeclared kind ran")
		}
		ev := operation.ProcessorEvent{ID: "evt_gadget", Type: "gadget.succeeded", DownstreamKey: testkind.Names.DownstreamKey(operation.NewID("wid_")),
			Outcome: operation.Outcome{ID: "gad_1", Succeeded: true}, Amount: 100, Payload: []byte(`{}`)}
		if result, err := h.svc.ReceiveProcessorEvent(t.Context(), ev); err != nil || result != operation.EventUnknownOperation {
			t.Fatalf("an event of an undeclared kind: %s, %v, want unknown_operation", result, err)
		}
		if _, err := h.ops.Kinds.Kind(testkind.Names.Type); err == nil {
			t.Fatal("the registry found an undeclared kind")
		}
	})
}
