// Command api serves the payments API. "api migrate" applies the migrations
// and "api seed" creates the development tenants; "api -h" lists the
// environment variables it reads.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
)

func main() { process.Main("api", run) }

// run reads the configuration from the environment and runs the command:
// serve (the default) until ctx ends, migrate or seed. Spans are flushed
// before it returns.
var run = process.Command("api [serve|migrate|seed]", "The payments API.",
	func(ctx context.Context, cfg api.Config, args []string, stdout io.Writer) error {
		return process.Run(ctx, "api", cfg.Common, stdout, func(logger *slog.Logger) error {
			command := "serve"
			if len(args) > 0 {
				command = args[0]
			}
			switch command {
			case "migrate":
				return api.Migrate(ctx, cfg.Session(), logger)
			case "seed":
				return seed(ctx, cfg, args[1:], stdout)
			case "serve":
				return process.Serve(ctx, api.New, cfg, logger)
			}
			return fmt.Errorf("unknown command %q: use serve, migrate or seed", command)
		})
	})

// seed runs "api seed", its flags in args.
func seed(ctx context.Context, cfg api.Config, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("seed", flag.ContinueOnError)
	flags.SetOutput(stdout)
	url := flags.String("webhook-url", "", "also give the demo tenant Acme a webhook endpoint at this URL")
	secret := flags.String("webhook-secret", "", "the whsec_ secret that endpoint signs with")
	if err := flags.Parse(args); err != nil {
		return err
	}
	return api.Seed(ctx, cfg, *url, *secret)
}
