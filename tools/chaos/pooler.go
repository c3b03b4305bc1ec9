package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/example/payments/internal/timer"
	"github.com/example/payments/tools/hapg"
	"github.com/example/payments/tools/pgbouncer"
)

// startPooler starts PgBouncer in front of dbURL's server, or of HAProxy on
// the Patroni pair c, and returns it and the settings that reach the
// database through it; what needs a session goes past it to the same
// server, or through HAProxy.
func startPooler(cfg Config, dbURL string, c *hapg.Cluster) (*pgbouncer.Bouncer, []string, error) {
	dbURL, err := upstream(c, dbURL)
	if err != nil {
		return nil, nil, err
	}
	// Not below the logs, which the pooler's user may not reach.
	dir, err := os.MkdirTemp("", "chaos-pgbouncer-")
	if err != nil {
		return nil, nil, err
	}
	b, err := pgbouncer.Start(dbURL, cfg.Profile.PoolerConns, dir)
	if err != nil {
		return nil, nil, err
	}
	pooled, err := b.URL(dbURL)
	if err != nil {
		b.Stop()
		return nil, nil, err
	}
	return b, []string{"DATABASE_URL=" + pooled, "DATABASE_SESSION_URL=" + dbURL}, nil
}

// killPooler SIGKILLs the pooler every PoolerKillEvery, if set, dropping
// every connection through it mid-transaction or not, and starts it again a
// second later, until ctx ends.
func (s *stack) killPooler(ctx context.Context, b *pgbouncer.Bouncer) {
	if s.cfg.Profile.PoolerKillEvery == 0 {
		return
	}
	timer.Every(ctx, s.cfg.Profile.PoolerKillEvery, func() {
		b.Kill()
		s.kills["pooler"].Add(1)
		sleep(ctx, time.Second)
		if err := b.Restart(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: restart the pooler: %v\n", err)
		}
	})
}

// stopPooler stops the pooler and removes its directory, its log kept with
// the run's (pgbouncer.log).
func stopPooler(cfg Config, b *pgbouncer.Bouncer) {
	b.Stop()
	keepLogs(cfg, b.Dir(), "pgbouncer.log")
	os.RemoveAll(b.Dir())
}

// keepLogs copies the files named, below dir, into the run's logs, each
// under its path with its slashes made dashes.
func keepLogs(cfg Config, dir string, names ...string) {
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // a daemon that never started wrote none
		}
		_ = os.WriteFile(filepath.Join(cfg.Logs, strings.ReplaceAll(name, "/", "-")), b, 0o644)
	}
}
