package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/example/payments/internal/tracing"
)

// Main runs a binary: run gets a context that ends on SIGINT or SIGTERM, the
// arguments and standard output. An error ends the process with status 1,
// after -h, which ends it with 0.
func Main(name string, run func(ctx context.Context, args []string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Configure reads a binary's configuration into cfg, a pointer to its
// struct, from the environment (Load). When args ask for help (-h or
// --help), it writes the usage line, the summary and the variables cfg reads
// to stdout instead (Usage), and returns flag.ErrHelp.
func Configure(args []string, stdout io.Writer, usage, summary string, cfg any) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		_ = Usage(stdout, usage, summary, cfg)
		return flag.ErrHelp
	}
	return Load(cfg)
}

// Command is the run a binary gives Main: it reads the binary's
// configuration, a C, as Configure does (usage and summary for -h), and
// runs body with it and the arguments.
func Command[C any](usage, summary string,
	body func(ctx context.Context, cfg C, args []string, stdout io.Writer) error) func(context.Context, []string, io.Writer) error {
	return func(ctx context.Context, args []string, stdout io.Writer) error {
		var cfg C
		if err := Configure(args, stdout, usage, summary, &cfg); err != nil {
			return err
		}
		return body(ctx, cfg, args, stdout)
	}
}

// Usage writes the environment variables cfg reads, with their defaults and
// descriptions, for a binary's -h: with a processor's, every processor's own
// under its name.
func Usage(w io.Writer, name, summary string, cfg any) error {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nEnvironment:\n", name, summary)
	tw := tabwriter.NewWriter(w, 1, 0, 4, ' ', 0)
	if err := envconfig.Usagef("", cfg, tw, envconfig.DefaultTableFormat); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p, ok := cfg.(withProcessor); ok {
		return p.processor().usage(w)
	}
	return nil
}

// Run runs body, a program's work, with its logs and traces set up as c
// says: body's logger writes to stdout, each record naming program, and the
// program's tracing (tracing.Setup, its console exporter writing to stdout)
// is flushed before Run returns.
func Run(ctx context.Context, program string, c Common, stdout io.Writer, body func(logger *slog.Logger) error) (err error) {
	logger, err := c.Logger(stdout)
	if err != nil {
		return err
	}
	stopTracing, err := startTracing(ctx, c.OTel, program, stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopTracing()) }()
	return body(logger.With("process", program))
}

// Serve builds a process with its constructor, newProcess, from cfg, and
// runs it until ctx ends: what a binary that serves does in Run's body.
func Serve[C any, P interface{ Run(context.Context) error }](ctx context.Context,
	newProcess func(context.Context, C, *slog.Logger) (P, error), cfg C, logger *slog.Logger) error {
	p, err := newProcess(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// startTracing sets the program's tracing up as cfg says (tracing.Setup),
// the console exporter writing to stdout, and returns what flushes it on
// exit, bounded by a few seconds so that an unreachable collector cannot
// hold the exit up.
func startTracing(ctx context.Context, cfg tracing.OTel, program string, stdout io.Writer) (stop func() error, err error) {
	shutdown, err := tracing.Setup(ctx, cfg, program, stdout)
	if err != nil {
		return nil, err
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return shutdown(ctx)
	}, nil
}
