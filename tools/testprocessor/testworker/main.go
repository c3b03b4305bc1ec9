// Command testworker is the worker with the test processor behind it
// (package testprocessor), for the tests that kill a real worker: no list
// names that processor, so the service's own worker cannot run against it.
// It reads the worker's configuration, and the test processor's settings
// (TESTPROCESSOR_*) in place of those PROCESSOR names.
package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/tools/testprocessor"
)

func main() { process.Main("testworker", run) }

// run works jobs against the test processor until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg worker.Config
	if err := process.Configure(args, stdout, "testworker", "The payments worker, against the test processor.", &cfg); err != nil {
		return err
	}
	var err error
	if cfg.Processor, err = process.NewProcessor(testprocessor.Adapter); err != nil {
		return err
	}
	return process.Run(ctx, "worker", cfg.Common, stdout, func(logger *slog.Logger) error {
		return process.Serve(ctx, worker.New, cfg, logger)
	})
}
