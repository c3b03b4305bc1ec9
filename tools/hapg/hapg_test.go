package hapg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/tools/hapg"
)

// TestFailoverLosesNoCommittedWrite kills the primary twice under a pool
// connected through the multi-host URL: each time the pool writes again once
// the synchronous standby has taken over, every row committed before the kill
// is there, and the killed node rejoins as the synchronous standby.
func TestFailoverLosesNoCommittedWrite(t *testing.T) {
	began := time.Now()
	c := hapg.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cfg, err := pgxpool.ParseConfig(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

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
			if _, err := pool.Exec(ctx, `INSERT INTO ledger (id, round) VALUES ($1, $2)`, round*1000+i, round); err != nil {
				t.Fatalf("round %d: insert %d: %v", round, i, err)
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

		// The first write through the same pool after the kill. Attempts
		// fail while the old primary's connections break and the standby
		// is still in recovery; ON CONFLICT in case an attempt committed but
		// its answer was lost.
		attempts := 0
		var lastErr error
		for {
			attempts++
			actx, acancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := pool.Exec(actx, `INSERT INTO ledger (id, round) VALUES ($1, $2) ON CONFLICT DO NOTHING`, round*1000+999, round)
			acancel()
			if err == nil {
				break
			}
			lastErr = err
			if ctx.Err() != nil {
				t.Fatalf("round %d: no write after the kill of %s within the test's deadline; last error: %v", round, killed, lastErr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		outage := time.Since(killedAt)
		committed++
		t.Logf("failover %d: killed primary %s; first write through the pool %v later (%d attempts; last error before: %v)",
			round, killed, outage.Round(time.Millisecond), attempts, lastErr)

		now, err := c.WaitPrimary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if now == killed {
			t.Fatalf("round %d: %s is still the primary after its kill", round, now)
		}

		// Synchronous mode: nothing whose commit returned is lost, and
		// the pool reads from the new primary.
		var n, maxRound int
		if err := pool.QueryRow(ctx, `SELECT count(*), max(round) FROM ledger`).Scan(&n, &maxRound); err != nil {
			t.Fatal(err)
		}
		if n != committed || maxRound != round {
			t.Fatalf("round %d: %d rows (max round %d) on the new primary %s, want %d committed (round %d)",
				round, n, maxRound, now, committed, round)
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
		if _, err := pool.Exec(ctx, `INSERT INTO ledger (id, round) VALUES ($1, $2)`, round*1000+998, round); err != nil {
			t.Fatal(err)
		}
		committed++
	}
	t.Logf("test body, cluster start included (cleanup not): %v", time.Since(began).Round(time.Millisecond))
}
