package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/jobs"
)

// TestTraceWorkTimed: every kind named and outcome is a series from the
// start; an attempt is timed under its kind and outcome, a kind not named
// too, with its span's trace id as the exemplar.
func TestTraceWorkTimed(t *testing.T) {
	t.Parallel()
	tp, _ := recorder(t)
	reg := prometheus.NewRegistry()
	mw := jobs.NewTraceWork(tp, nil).Timed(reg, "drive_operation", "deliver_webhook")
	job := &rivertype.JobRow{ID: 1, Kind: "drive_operation", Attempt: 1, MaxAttempts: 10, Queue: "default", EncodedArgs: []byte(`{}`)}
	if err := mw.Work(context.Background(), job, func(context.Context) error { return errors.New("boom") }); err == nil {
		t.Fatal("the attempt's error was lost")
	}
	other := &rivertype.JobRow{ID: 2, Kind: "widget", Attempt: 1, MaxAttempts: 10, Queue: "default", EncodedArgs: []byte(`{}`)}
	var traceID string
	if err := mw.Work(context.Background(), other, func(ctx context.Context) error {
		traceID = trace.SpanContextFromContext(ctx).TraceID().String()
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]uint64{}
	exemplar := ""
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[[2]string{labels["kind"], labels["result"]}] = m.GetHistogram().GetSampleCount()
			for _, b := range m.GetHistogram().GetBucket() {
				if labels["kind"] == "widget" && b.GetExemplar() != nil {
					exemplar = b.GetExemplar().GetLabel()[0].GetValue()
				}
			}
		}
	}
	if len(got) != 2*len(jobs.Outcomes)+1 {
		t.Errorf("%d series, want 2 kinds × %d outcomes and the widget's: %v", len(got), len(jobs.Outcomes), got)
	}
	for k, n := range got {
		want := uint64(0)
		if k == [2]string{"drive_operation", jobs.OutcomeError} || k == [2]string{"widget", jobs.OutcomeOK} {
			want = 1
		}
		if n != want {
			t.Errorf("%v: %d attempts, want %d", k, n, want)
		}
	}
	if exemplar != traceID || traceID == "" {
		t.Errorf("widget's exemplar %q, want its attempt's trace %q", exemplar, traceID)
	}
}
