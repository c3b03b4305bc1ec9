package process

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceIDs: a line logged with a context holding a span carries its
// trace_id and span_id, in both formats and through With; a line logged
// without one carries neither.
func TestTraceIDs(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		logger := NewLogger(&buf, "json", slog.LevelInfo).With("process", "worker")
		logger.InfoContext(ctx, "job attempt", "job_id", 7)
		logger.Info("no context")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		var with, without map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &with); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &without); err != nil {
			t.Fatal(err)
		}
		if with["trace_id"] != sc.TraceID().String() || with["span_id"] != sc.SpanID().String() || with["process"] != "worker" {
			t.Errorf("line with a span: %v", with)
		}
		if _, ok := without["trace_id"]; ok {
			t.Errorf("line without a span: %v", without)
		}
	})
	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		NewLogger(&buf, "text", slog.LevelInfo).LogAttrs(ctx, slog.LevelWarn, "request", slog.Int("status", 500))
		if got := buf.String(); !strings.Contains(got, "trace_id="+sc.TraceID().String()) || !strings.Contains(got, "span_id="+sc.SpanID().String()) {
			t.Errorf("text line %q", got)
		}
	})
	t.Run("Quiet", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		Quiet(NewLogger(&buf, "json", slog.LevelInfo)).WarnContext(ctx, "river")
		if !strings.Contains(buf.String(), sc.TraceID().String()) {
			t.Errorf("quiet line %q", buf.String())
		}
	})
}
