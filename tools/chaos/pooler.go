package chaos

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/pgbouncer"
)

// startPooler starts PgBouncer in front of dbURL's server and returns it
// and the settings that reach the database through it.
func startPooler(cfg Config, dbURL string) (*pgbouncer.Bouncer, []string, error) {
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

// killPooler SIGKILLs the pooler every PoolerKillEvery, dropping every
// connection through it mid-transaction or not, and starts it again a
// second later, until ctx ends.
func (s *stack) killPooler(ctx context.Context, b *pgbouncer.Bouncer) {
	database.Every(ctx, s.cfg.Profile.PoolerKillEvery, func() {
		b.Kill()
		s.kills["pooler"].Add(1)
		sleep(ctx, time.Second)
		if err := b.Restart(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: restart the pooler: %v\n", err)
		}
	})
}
