// Command fakeprocessor runs the fake card processor, a stand-in for a real
// one: a Stripe-like HTTP API on its own port, keeping its ledger in the
// "processor" schema of the database, which it migrates itself when it
// starts. "fakeprocessor -h" lists the environment variables it reads.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/fakeprocessor/processor"
)

func main() { process.Main("fakeprocessor", run) }

// run reads the configuration from the environment and serves until ctx
// ends. Spans are flushed before it returns.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg processor.Config
	if err := process.Configure(args, stdout, "fakeprocessor", "The fake card processor.", &cfg); err != nil {
		return err
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %v", args)
	}
	return process.Run(ctx, "fakeprocessor", cfg.Common, stdout, func(logger *slog.Logger) error {
		return process.Serve(ctx, processor.New, cfg, logger)
	})
}
