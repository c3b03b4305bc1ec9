package process

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
