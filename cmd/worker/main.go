// Command worker runs the River jobs that drive every operation through
// their phases, calling the card processor over HTTP, and the periodic
// reconciler and key reaper. It serves its metrics, and River's dashboard
// when RIVER_UI_PASSWORD is set, on the internal METRICS_ADDR.
// "worker review" lists the needs-review queue, "worker review resolve ID"
// closes a case, and "worker -h" lists the environment variables it reads.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/worker"
)

func main() { process.Main("worker", run) }

// run reads the configuration from the environment and works jobs until ctx
// ends, or runs the review command. Spans are flushed before it returns.
var run = process.Command("worker [review [-all] | review resolve ID]", "The payments worker.",
	func(ctx context.Context, cfg worker.Config, args []string, stdout io.Writer) error {
		if len(args) > 0 {
			if args[0] != "review" {
				return fmt.Errorf("unknown command %q: use review, or no command to work jobs", args[0])
			}
			return worker.Review(ctx, cfg.Common, args[1:], stdout)
		}
		return process.Run(ctx, "worker", cfg.Common, stdout, func(logger *slog.Logger) error {
			return process.Serve(ctx, worker.New, cfg, logger)
		})
	})
