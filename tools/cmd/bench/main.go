// Command bench measures the service against the machine: the ceilings
// (one-row inserts and point selects through pgx) and each mode of the
// service, in one run on a fresh database, printed as ratios to the
// ceilings. "make bench" runs it; "bench -h" lists its settings.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/tools/bench"
)

type config struct {
	DatabaseURL string        `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable" desc:"the server; the run creates a database of its own there"`
	Clients     int           `envconfig:"BENCH_CLIENTS" default:"32" desc:"concurrent clients of each mode"`
	Duration    time.Duration `envconfig:"BENCH_DURATION" default:"10s" desc:"how long each mode is measured"`
	BigTable    int           `envconfig:"BENCH_BIG_TABLE" default:"2000000" desc:"finished keys in the table for the last mode (0: skip it)"`
	ProfileDir  string        `envconfig:"BENCH_PROFILE_DIR" desc:"when set, a CPU profile of each mode is written there (go tool pprof reads it)"`
	// The retention mode is off unless asked for: it is long.
	RetentionKeys     int           `envconfig:"BENCH_RETENTION_KEYS" default:"0" desc:"when positive, the retention mode: this many expired keys (and as many expired tombstones) reaped while new keys are measured"`
	RetentionDuration time.Duration `envconfig:"BENCH_RETENTION_DURATION" desc:"how long the retention mode measures new keys, in slices of BENCH_DURATION with the reaper off, then on, and so on; it ends sooner once the reaper has caught up (default: two slices)"`
	RetentionOnly     bool          `envconfig:"BENCH_RETENTION_ONLY" default:"false" desc:"run the retention mode alone, without the ceilings and the other modes"`
	ReapBatchTime     time.Duration `envconfig:"BENCH_REAP_BATCH_TIME" default:"-1ns" desc:"the retention mode's reaper's REAP_BATCH_TIME (negative: the worker's default)"`
	ReapRest          float64       `envconfig:"BENCH_REAP_REST" default:"-1" desc:"the retention mode's reaper's REAP_REST (negative: the worker's default)"`
}

func main() { process.Main("bench", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	if err := process.Configure(args, stdout, "bench", "The benchmark: the service as ratios to the machine's ceilings.", &cfg); err != nil {
		return err
	}
	// The reaper's pace as the worker's, unless asked otherwise.
	var pace *idempotency.ReapPace
	if cfg.ReapBatchTime >= 0 || cfg.ReapRest >= 0 {
		var w worker.Config
		if err := envconfig.Process("bench_unset", &w); err != nil {
			return err
		}
		p := w.ReapPace()
		if cfg.ReapBatchTime >= 0 {
			p.Target = cfg.ReapBatchTime
		}
		if cfg.ReapRest >= 0 {
			p.Pause = cfg.ReapRest
		}
		pace = &p
	}
	name := fmt.Sprintf("bench_%d", time.Now().Unix())
	url, drop, err := database.CreateFresh(ctx, cfg.DatabaseURL, name)
	if err != nil {
		return err
	}
	defer drop()
	if err := api.Migrate(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench: %d clients, %s a mode, database %s (dropped at the end)\n", cfg.Clients, cfg.Duration, name)
	_, err = bench.Run(ctx, bench.Config{DatabaseURL: url, Clients: cfg.Clients, Duration: cfg.Duration, BigTable: cfg.BigTable,
		ProfileDir: cfg.ProfileDir, RetentionKeys: cfg.RetentionKeys, RetentionDuration: cfg.RetentionDuration,
		RetentionOnly: cfg.RetentionOnly, RetentionPace: pace}, stdout)
	return err
}
