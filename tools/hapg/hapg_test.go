package hapg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/tools/hapg"
)

// TestFailoverLosesNoCommittedWrite kills the primary twice under two pools,
// one connected through the multi-host URL and one through HAProxy, writing
// in turn: each time both pools write again once the synchronous standby has
// taken over, every row committed before the kill is there, and the killed
// node rejoins as the synchronous standby.
func TestFailoverLosesNoCommittedWrite(t *testing.T) {
	began := time.Now()
	c := hapg.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	pools := []struct {
		name string
		*pgxpool.Pool
	}{{"multi-host", connect(ctx, t, c.URL())}, {"HAProxy", connect(ctx, t, c.ProxyURL())}}
	pool := pools[0]

	if _, err := pool.Exec(ctx, `CREATE TABLE ledger (id bigint PRIMARY KEY, round int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const perRound = 20
	committed := 0 // rows whose commit returned before a kill

	for round := 1; round <= 2; round++ {
		primary, err := c.Primary()
		if err != nil {
			t.Fatal(err)
		}
		// Commits acknowledged right up to the kill: each waited for the
		// synchronous standby.
		for i := range perRound {
			p := pools[i%len(pools)]
			if _, err := p.Exec(ctx, `INSERT INTO ledger (id, round) VALUES ($1, $2)`, round*1000+i, round); err != nil {
				t.Fatalf("round %d: insert %d through %s: %v", round, i, p.name, err)
			}
			committed++
		}

		killed, err := c.KillPrimary()
		if err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		if killed != primary {
			t.Fatalf("round %d: killed %s, but the primary was %s", round, killed, primary)
		}

		// The first write through each pool after the kill, both at once.
		var wg sync.WaitGroup
		for j, p := range pools {
			wg.Go(func() {
				firstWrite(ctx, t, p.Pool, round*1000+990+j, round, fmt.Sprintf("failover %d: killed primary %s; first write through the %s pool", round, killed, p.name), killedAt)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		committed += len(pools)

		now, err := c.WaitPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if now == killed {
			t.Fatalf("round %d: %s is still the primary after its kill", round, now)
		}

		// Synchronous mode: nothing whose commit returned is lost, and
		// both pools read from the new primary.
		for _, p := range pools {
			var n, maxRound int
			if err := p.QueryRow(ctx, `SELECT count(*), max(round) FROM ledger`).Scan(&n, &maxRound); err != nil {
				t.Fatal(err)
			}
			if n != committed || maxRound != round {
				t.Fatalf("round %d: %d rows (max round %d) through %s on the new primary %s, want %d committed (round %d)",
					round, n, maxRound, p.name, now, committed, round)
			}
		}

		restartAt := time.Now()
		if err := c.Restart(killed); err != nil {
			t.Fatal(err)
		}
		sync, err := c.WaitSyncStandby(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sync != killed {
			t.Fatalf("round %d: sync standby is %s, want the rejoined %s", round, sync, killed)
		}
		t.Logf("failover %d: %s rejoined as a streaming synchronous standby of %s %v after its restart",
			round, killed, now, time.Since(restartAt).Round(time.Millisecond))

		// A commit now waits for the rejoined standby again.
		for j, p := range pools {
			if _, err := p.Exec(ctx, `INSERT INTO ledger (id, round) VALUES ($1, $2)`, round*1000+980+j, round); err != nil {
				t.Fatalf("through %s: %v", p.name, err)
			}
			committed++
		}
	}
	t.Logf("test body, cluster start included (cleanup not): %v", time.Since(began).Round(time.Millisecond))
}

// connect opens a small pool on dbURL, closed when t ends.
func connect(ctx context.Context, t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// firstWrite inserts row id through pool until it commits, and logs how long
// after killedAt it did. Attempts fail while the old primary's connections
// break and the standby is still in recovery; ON CONFLICT in case an attempt
// committed but its answer was lost.
func firstWrite(ctx context.Context, t *testing.T, pool *pgxpool.Pool, id, round int, what string, killedAt time.Time) {
	attempts := 0
	var lastErr error
	for {
		attempts++
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := pool.Exec(actx, `INSERT INTO ledger (id, round) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, round)
		acancel()
		if err == nil {
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			t.Errorf("%s: none within the test's deadline; last error: %v", what, lastErr)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s %v later (%d attempts; last error before: %v)", what, time.Since(killedAt).Round(time.Millisecond), attempts, lastErr)
}
