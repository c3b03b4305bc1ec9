// Command processor runs the fake card processor: a Stripe-like HTTP API on
// its own port, keeping its ledger in the "processor" schema of the database.
// It does not migrate the database; the migrate command does. Configuration
// is read from the environment; run "processor -h" to list the variables.
package main

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

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/processor"
	"github.com/example/payments/internal/serve"
)

// config is the whole configuration of the processor binary.
type config struct {
	DatabaseURL  string        `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable" desc:"Postgres connection URL"`
	Addr         string        `envconfig:"PROCESSOR_ADDR" default:":8090" desc:"address to listen on"`
	FailRate     float64       `envconfig:"PROCESSOR_FAIL_RATE" default:"0" desc:"chaos: share of POSTs answered 500 before charging (0 to 1)"`
	DropRate     float64       `envconfig:"PROCESSOR_DROP_RATE" default:"0" desc:"chaos: share of new results committed and then not answered (0 to 1)"`
	Latency      time.Duration `envconfig:"PROCESSOR_LATENCY" default:"0s" desc:"chaos: latency added to every request"`
	ExecLatency  time.Duration `envconfig:"PROCESSOR_EXEC_LATENCY" default:"0s" desc:"chaos: time a charge or refund takes inside its transaction, holding its key (under 30s)"`
	TimeoutHang  time.Duration `envconfig:"PROCESSOR_TIMEOUT_HANG" default:"60s" desc:"how long pm_card_timeout withholds its answer"`
	KeyRetention time.Duration `envconfig:"PROCESSOR_KEY_RETENTION" default:"168h" desc:"how long idempotency keys are remembered"`
}

// shutdownTimeout bounds how long in-flight requests may finish on shutdown.
const shutdownTimeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		serve.NewLogger(os.Stderr, slog.LevelInfo).Error("processor failed", "err", err)
		os.Exit(1)
	}
}

// run serves the processor until ctx ends. It reads its configuration from
// the process environment, because envconfig reads nothing else; args takes
// only -h, which prints the variables to stdout. Logs go to stdout as JSON.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("processor", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, "Usage: processor\n\nThe fake card processor.")
		tw := tabwriter.NewWriter(stdout, 1, 0, 4, ' ', 0)
		_ = envconfig.Usagef("", &cfg, tw, envconfig.DefaultTableFormat)
		_ = tw.Flush()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := envconfig.Process("", &cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}

	logger := serve.NewLogger(stdout, slog.LevelInfo)
	serve.LogConfig(logger, &cfg)

	pool, err := database.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	srv, err := processor.New(pool, logger, processor.Config{
		Chaos: processor.Chaos{
			FailRate:    cfg.FailRate,
			DropRate:    cfg.DropRate,
			Latency:     cfg.Latency,
			ExecLatency: cfg.ExecLatency,
		},
		TimeoutHang:  cfg.TimeoutHang,
		KeyRetention: cfg.KeyRetention,
	})
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// Requests held by pm_card_timeout answer as soon as shutdown starts,
	// instead of holding it up for the hang limit.
	context.AfterFunc(ctx, srv.Close)

	server := serve.Server{
		Addr:    cfg.Addr,
		Handler: srv,
		Logger:  logger,
		// A response may legitimately take the latency, the execution and
		// the hang limit.
		WriteTimeout:    cfg.Latency + cfg.ExecLatency + cfg.TimeoutHang + 30*time.Second,
		ShutdownTimeout: shutdownTimeout,
	}
	return server.Run(ctx)
}
