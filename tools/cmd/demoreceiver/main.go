// Command demoreceiver is a demo of a webhook endpoint as a merchant would run
// one, to copy: it verifies each delivery's signature, processes each event
// once by printing it, and keeps the ids it has processed in a file so that a
// restart does not process them again. "demoreceiver -h" lists the
// environment variables it reads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/tracing"
	"github.com/example/payments/tools/demoreceiver"
)

func main() { process.Main("demoreceiver", run) }

// run reads the configuration from the environment and serves until ctx
// ends. Events and logs both go to stdout; so do spans, with
// OTEL_TRACES_EXPORTER=console. Spans are flushed before it returns.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	var cfg demoreceiver.Config
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		_ = process.Usage(stdout, "demoreceiver", "A webhook endpoint that verifies, deduplicates and prints events.", &cfg)
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %v", args)
	}
	if err := process.Load(&cfg); err != nil {
		return err
	}
	logger, err := cfg.Logging().Logger(stdout)
	if err != nil {
		return err
	}
	logger = logger.With("process", "demoreceiver")
	stopTracing, err := process.StartTracing(ctx, cfg.OTel, "demoreceiver", stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopTracing()) }()
	rcv, err := demoreceiver.New(cfg, logger, stdout)
	if err != nil {
		return err
	}
	// A delivery is answered in the time of one fsync; the sender's own
	// timeout is far shorter than these. Each is a span, in the trace the
	// sender's traceparent names.
	srv, err := process.Listen(cfg.Addr, tracing.Middleware(nil)(rcv), logger, 30*time.Second, 15*time.Second)
	if err != nil {
		return errors.Join(err, rcv.Close())
	}
	// Run returns once the deliveries in flight are answered, so the
	// dedupe file is closed after its last append.
	err = srv.Run(ctx)
	return errors.Join(err, rcv.Close())
}
