// Command chaos proves the money invariants under kills, outages and races:
// it starts its own stack (two APIs, two workers and the fake processor, as
// real processes) against a fresh database, drives payments and refunds
// through the public Go client while it SIGKILLs processes and cuts the
// processor off, then checks every invariant and prints a summary. It exits
// 1 on any violation. "make chaos" runs it; "chaos -h" lists its settings.
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/chaos"
)

// config is read from the environment.
type config struct {
	DatabaseURL  string `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable" desc:"the server; each run creates a database of its own there"`
	Profile      string `envconfig:"CHAOS_PROFILE" default:"short" desc:"short (about 2 minutes, in CI), pooler (short, through PgBouncer in transaction mode, which is killed too), failover (through PgBouncer and HAProxy to a Patroni pair whose primary is killed, needs patroni, etcd, haproxy and pgbouncer), stripe (short, on the Stripe adapter against the Stripe simulator), partition (each API and worker through a Toxiproxy link of its own, a worker's cut for longer than the bounds on a silent peer, every link slowed between cuts) or long (30 minutes and more)"`
	Seed         uint64 `envconfig:"CHAOS_SEED" desc:"repeats a run's choices (0: a new seed, printed)"`
	Bin          string `envconfig:"CHAOS_BIN" default:"bin" desc:"where the api, worker and processor binaries are"`
	Logs         string `envconfig:"CHAOS_LOGS" desc:"where each process's log is kept (default chaos-logs/<run>)"`
	KeepDatabase bool   `envconfig:"CHAOS_KEEP_DB" default:"false" desc:"keep the run's database even when it passes"`
}

func main() { process.Main("chaos", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	if err := process.Configure(args, stdout, "chaos", "The chaos run: invariants under kills, outages and races.", &cfg); err != nil {
		return err
	}
	profile, ok := chaos.Profiles[cfg.Profile]
	if !ok {
		return fmt.Errorf("CHAOS_PROFILE %q: use short, pooler, failover, stripe, partition or long", cfg.Profile)
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	sum, err := chaos.Run(ctx, chaos.Config{Profile: profile, Seed: cfg.Seed, DatabaseURL: cfg.DatabaseURL,
		Bin: cfg.Bin, Logs: cfg.Logs, KeepDatabase: cfg.KeepDatabase}, stdout)
	if err != nil {
		return err
	}
	if !sum.Passed() {
		return fmt.Errorf("invariants violated (seed %d): see the summary and the logs in %s", cfg.Seed, sum.Logs)
	}
	return nil
}
