package process

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
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

// TestLogLevel: LOG_LEVEL is read with the rest of the configuration,
// info by default; each level writes its records and the more severe ones,
// and an unknown level is refused, naming the variable.
func TestLogLevel(t *testing.T) {
	t.Setenv("LOG_LEVEL", "") // restored when the test ends
	os.Unsetenv("LOG_LEVEL")
	var cfg Common
	if err := Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.LogLevel != "info" {
		t.Fatalf("default LOG_LEVEL %q, want info", cfg.LogLevel)
	}
	t.Setenv("LOG_LEVEL", "debug")
	if err := Load(&cfg); err != nil || cfg.LogLevel != "debug" {
		t.Fatalf("LOG_LEVEL=debug read as %q (%v)", cfg.LogLevel, err)
	}
	for _, tt := range []struct {
		level string
		want  []string // the messages written, of debug, info, warn and error
	}{
		{"debug", []string{"d", "i", "w", "e"}},
		{"info", []string{"i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"error", []string{"e"}},
	} {
		var buf bytes.Buffer
		logger, err := Logging{LogFormat: "json", LogLevel: tt.level}.Logger(&buf)
		if err != nil {
			t.Fatal(err)
		}
		logger.Debug("d")
		logger.Info("i")
		logger.Warn("w")
		logger.Error("e")
		var got []string
		for line := range strings.Lines(buf.String()) {
			var rec struct{ Msg string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			got = append(got, rec.Msg)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("LOG_LEVEL=%s wrote %v, want %v", tt.level, got, tt.want)
		}
	}
	for _, bad := range []string{"verbose", "INFO", "warning"} {
		cfg.LogLevel = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
			t.Errorf("LOG_LEVEL=%s: %v, want an error naming LOG_LEVEL", bad, err)
		}
		if _, err := cfg.Logger(io.Discard); err == nil {
			t.Errorf("LOG_LEVEL=%s: a logger made", bad)
		}
	}
}

// TestTextLogs: LOG_FORMAT=text writes lines a person reads.
func TestTextLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	NewLogger(&buf, "text", slog.LevelInfo).Info("listening", "addr", ":8080")
	if got := buf.String(); !strings.Contains(got, `msg=listening addr=:8080`) || strings.Contains(got, "{") {
		t.Fatalf("text line %q", got)
	}
}
