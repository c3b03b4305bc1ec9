// Command fakeprocessor runs the fake card processor, a stand-in for a real
// one: a Stripe-like HTTP API on its own port, keeping its ledger in the
// "processor" schema of the database, which it migrates itself when it
// starts. "fakeprocessor -h" lists the environment variables it reads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/fakeprocessor/processor"
)

func main() { process.Main("fakeprocessor", run) }

// run reads the configuration from the environment and serves until ctx
// ends. Spans are flushed before it returns.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	var cfg processor.Config
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		_ = process.Usage(stdout, "fakeprocessor", "The fake card processor.", &cfg)
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %v", args)
	}
	if err := process.Load(&cfg); err != nil {
		return err
	}
	logger, err := cfg.Logger(stdout)
	if err != nil {
		return err
	}
	logger = logger.With("process", "fakeprocessor")
	stopTracing, err := process.StartTracing(ctx, cfg.OTel, "fakeprocessor", stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopTracing()) }()
	p, err := processor.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}
