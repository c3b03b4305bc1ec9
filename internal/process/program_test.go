package process

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

// TestConfigure: -h writes the usage line, the summary and the variables,
// and returns flag.ErrHelp without reading them.
func TestConfigure(t *testing.T) {
	t.Parallel()
	var cfg Logging
	var out bytes.Buffer
	if err := Configure([]string{"-h"}, &out, "prog [cmd]", "A program.", &cfg); !errors.Is(err, flag.ErrHelp) || cfg.LogLevel != "" {
		t.Fatalf("err = %v, LOG_LEVEL read as %q; want flag.ErrHelp, nothing read", err, cfg.LogLevel)
	}
	if got := out.String(); !strings.HasPrefix(got, "Usage: prog [cmd]\n\nA program.\n") || !strings.Contains(got, "LOG_LEVEL") {
		t.Fatalf("usage: %s", got)
	}
}

// TestRun: the body's logger writes to stdout, naming the program, and a
// configuration Run cannot log with is refused before the body runs. Not
// parallel: Run sets the global TracerProvider.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	c := Common{Logging: Logging{LogFormat: "json", LogLevel: "info"}}
	if err := Run(context.Background(), "prog", c, &out, func(logger *slog.Logger) error {
		logger.Info("hello")
		return errors.New("done")
	}); err == nil || err.Error() != "done" {
		t.Fatalf("err = %v, want the body's", err)
	}
	if got := out.String(); !strings.Contains(got, `"msg":"hello"`) || !strings.Contains(got, `"process":"prog"`) {
		t.Fatalf("logs: %s", got)
	}
	c.LogFormat = "xml"
	if err := Run(context.Background(), "prog", c, &out, func(*slog.Logger) error {
		t.Fatal("the body ran")
		return nil
	}); err == nil || !strings.Contains(err.Error(), "LOG_FORMAT") {
		t.Fatalf("err = %v, want one naming LOG_FORMAT", err)
	}
}

// ran is a process for TestServe: Run returns its error.
type ran struct{ err error }

func (r ran) Run(context.Context) error { return r.err }

// TestServe: the process is built from the configuration and run; one that
// cannot be built is not run.
func TestServe(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	build := func(_ context.Context, cfg string, _ *slog.Logger) (ran, error) {
		if cfg == "broken" {
			return ran{}, errors.New("cannot build")
		}
		return ran{err: errors.New("ran " + cfg)}, nil
	}
	if err := Serve(context.Background(), build, "cfg", logger); err == nil || err.Error() != "ran cfg" {
		t.Fatalf("err = %v, want the run's", err)
	}
	if err := Serve(context.Background(), build, "broken", logger); err == nil || err.Error() != "cannot build" {
		t.Fatalf("err = %v, want the constructor's", err)
	}
}
