package process

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/example/payments/internal/secret"
)

// TestSecret: a set secret prints as ******** however it is formatted or
// logged, an unset one as nothing, and envconfig reads it as a string.
func TestSecret(t *testing.T) {
	t.Setenv("PAYMENTS_SECRET_TEST_PASSWORD", "hunter2")
	var cfg struct {
		Password secret.String `envconfig:"PAYMENTS_SECRET_TEST_PASSWORD"`
		Unset    secret.String `envconfig:"PAYMENTS_SECRET_TEST_UNSET"`
	}
	if err := Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if string(cfg.Password) != "hunter2" {
		t.Fatalf("read %q", string(cfg.Password))
	}
	var logs bytes.Buffer
	for _, format := range []string{"json", "text"} {
		logger := NewLogger(&logs, format, slog.LevelInfo)
		logger.Info("secret", "password", cfg.Password)
		LogConfig(logger, cfg)
	}
	printed := fmt.Sprint(cfg.Password) + fmt.Sprintf(" %v %+v %#v %s ", cfg, cfg, cfg, cfg.Password) + logs.String()
	if strings.Contains(printed, "hunter2") || !strings.Contains(printed, "********") {
		t.Fatalf("printed: %s", printed)
	}
	if s := cfg.Unset.String(); s != "" {
		t.Fatalf("unset: %q", s)
	}
}
