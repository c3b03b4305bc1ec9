// Command api serves the payments API. "api migrate" applies the migrations
// and "api seed" creates the development tenants; "api -h" lists the
// environment variables it reads.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
)

func main() { process.Main("api", run) }

// run reads the configuration from the environment and runs the command:
// serve (the default) until ctx ends, migrate or seed. Spans are flushed
// before it returns.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	var cfg api.Config
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		_ = process.Usage(stdout, "api [serve|migrate|seed]", "The payments API.", &cfg)
		return flag.ErrHelp
	}
	if err := process.Load(&cfg); err != nil {
		return err
	}
	logger, err := cfg.Logger(stdout)
	if err != nil {
		return err
	}
	logger = logger.With("process", "api")
	stopTracing, err := process.StartTracing(ctx, cfg.OTel, "api", stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopTracing()) }()
	command := "serve"
	if len(args) > 0 {
		command = args[0]
	}
	switch command {
	case "migrate":
		return api.Migrate(ctx, cfg.Session(), logger)
	case "seed":
		flags := flag.NewFlagSet("seed", flag.ContinueOnError)
		flags.SetOutput(stdout)
		url := flags.String("webhook-url", "", "also give the demo tenant Acme a webhook endpoint at this URL")
		secret := flags.String("webhook-secret", "", "the whsec_ secret that endpoint signs with")
		if err := flags.Parse(args[1:]); err != nil {
			return err
		}
		return api.Seed(ctx, cfg, *url, *secret)
	case "serve":
		a, err := api.New(ctx, cfg, logger)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
	return fmt.Errorf("unknown command %q: use serve, migrate or seed", command)
}
