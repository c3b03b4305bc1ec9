package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/linkfault"
)

// The partition profile's bounds: a partitioned worker's presence is given
// up within the kernel's bound on a silent peer (database.UserTimeout and a
// keepalive probe; behind the run's proxy, which passes a close on, the
// worker's own ping sees it sooner), and taken back within a connection
// attempt and two presence checks of the heal.
const (
	givenUpBound = database.UserTimeout + database.KeepaliveInterval
	retakenBound = database.ConnectTimeout + 4*time.Second
)

// Partition is one cut of a worker's link to the database: how long the
// worker's presence took to be given up (from the cut) and taken back
// (from the heal), as pg_locks showed them.
type Partition struct {
	Worker           string
	Cut              time.Time
	GivenUp, Retaken time.Duration
	// Err is what the run could not do or see: the toxic not added, the
	// presence not given up or not taken back in time.
	Err string
}

// links are the partition profile's: Toxiproxy between each API and worker
// and Postgres, one link a process, so that one worker is cut alone.
type links struct {
	byProc map[string]*linkfault.Link
	pool   *pgxpool.Pool // past every link: the run's own
	log    records[Partition]
	slowed records[window]
}

// startLinks starts a link before dbURL's server for each API and worker,
// and returns them and the settings that reach the database through each
// process's.
func startLinks(dbURL string, pool *pgxpool.Pool) (*links, func(proc string) []string, error) {
	ls := &links{byProc: map[string]*linkfault.Link{}, pool: pool}
	urls := map[string]string{}
	for _, name := range []string{"api-1", "api-2", "worker-1", "worker-2"} {
		l, u, err := linkfault.Before(name, dbURL)
		if err != nil {
			ls.close()
			return nil, nil, err
		}
		ls.byProc[name], urls[name] = l, u
	}
	return ls, func(proc string) []string { return []string{"DATABASE_URL=" + urls[proc]} }, nil
}

func (ls *links) close() {
	for _, l := range ls.byProc {
		l.Close()
	}
}

// partitions, from PartitionEvery into the load until ctx ends, cuts a
// random worker's link for PartitionFor, longer than the bounds, and heals
// it; between cuts every link is slowed (latency of 50 to 200 ms and a
// bandwidth limit) for a while. No worker is killed during a cut, so that
// the presences pg_locks shows are the two workers'.
func (s *stack) partitions(ctx context.Context, ls *links) {
	var workers []*proc
	for _, p := range s.procs {
		if p.kind == "worker" {
			workers = append(workers, p)
		}
	}
	for {
		sleep(ctx, s.cfg.Profile.PartitionEvery/2)
		if ctx.Err() != nil {
			return
		}
		ls.slow(ctx, s.cfg.Profile.PartitionEvery/2)
		if end, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(end) < s.cfg.Profile.PartitionFor {
			return // no time left in the load for a whole cut
		}
		w := workers[s.rng.IntN(len(workers))]
		for _, p := range workers {
			p.turn.Lock()
		}
		part := ls.partition(ctx, w.name, s.cfg.Profile.PartitionFor)
		for _, p := range workers {
			p.turn.Unlock()
		}
		ls.log.add(part)
		s.downs.add(down{window: window{part.Cut, part.Cut.Add(s.cfg.Profile.PartitionFor)}, cut: true})
		fmt.Fprintf(w.log, "=== chaos: link cut for %s: presence given up after %s, taken back %s after the heal %s\n",
			s.cfg.Profile.PartitionFor, part.GivenUp, part.Retaken, part.Err)
	}
}

// slow slows every link for d.
func (ls *links) slow(ctx context.Context, d time.Duration) {
	from := time.Now()
	for name, l := range ls.byProc {
		if err := l.Slow(125*time.Millisecond, 75*time.Millisecond, 256); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: slow %s's link: %v\n", name, err)
		}
	}
	sleep(ctx, d)
	for name, l := range ls.byProc {
		if err := l.Unslow(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: unslow %s's link: %v\n", name, err)
		}
	}
	ls.slowed.add(window{from, time.Now()})
}

// partition cuts worker's link for d and heals it, measuring its presence
// meanwhile: given up when one of the presences held at the cut is gone,
// taken back when as many are held again, one on a new session.
func (ls *links) partition(ctx context.Context, worker string, d time.Duration) Partition {
	part := Partition{Worker: worker, Cut: time.Now()}
	held, err := ls.presences(ctx)
	if err != nil {
		part.Err = err.Error()
		return part
	}
	link := ls.byProc[worker]
	if err := link.Partition(); err != nil {
		part.Err = err.Error()
		return part
	}
	part.Cut = time.Now()
	healAt := part.Cut.Add(d)
	for part.GivenUp == 0 && time.Now().Before(healAt) && ctx.Err() == nil {
		now, err := ls.presences(ctx)
		if err == nil && len(common(now, held)) < len(held) {
			part.GivenUp = time.Since(part.Cut)
		}
		sleep(ctx, 100*time.Millisecond)
	}
	sleep(ctx, time.Until(healAt))
	if err := link.Heal(); err != nil {
		part.Err = err.Error()
		return part
	}
	healed := time.Now()
	for deadline := healed.Add(time.Minute); time.Now().Before(deadline); {
		now, err := ls.presences(context.WithoutCancel(ctx))
		if err == nil && len(now) >= len(held) && len(common(now, held)) < len(now) {
			part.Retaken = time.Since(healed)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var bad []string
	switch {
	case part.GivenUp == 0:
		bad = append(bad, fmt.Sprintf("presence not given up during the %s cut", d))
	case part.GivenUp > givenUpBound:
		bad = append(bad, fmt.Sprintf("presence given up after %s, bound %s", part.GivenUp.Round(time.Millisecond), givenUpBound))
	}
	switch {
	case part.Retaken == 0:
		bad = append(bad, "presence not taken back within a minute of the heal")
	case part.Retaken > retakenBound:
		bad = append(bad, fmt.Sprintf("presence taken back %s after the heal, bound %s", part.Retaken.Round(time.Millisecond), retakenBound))
	}
	part.Err = strings.Join(bad, "; ")
	return part
}

// presences are the backends holding a presence lock on the run's
// database.
func (ls *links) presences(ctx context.Context) (map[int32]bool, error) {
	rows, err := ls.pool.Query(ctx, `
SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND classid::bigint = $1 AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint32(database.PresenceClass)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[int32]bool{}
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		held[pid] = true
	}
	return held, rows.Err()
}

// common are the pids in both a and b.
func common(a, b map[int32]bool) []int32 {
	var both []int32
	for pid := range a {
		if b[pid] {
			both = append(both, pid)
		}
	}
	return both
}

// checkPartitions lists the partitions whose presence missed its bounds,
// and the run that made none.
func checkPartitions(parts []Partition) []string {
	var bad []string
	for _, p := range parts {
		if p.Err != "" {
			bad = append(bad, fmt.Sprintf("%s cut at %s: %s", p.Worker, p.Cut.Format(time.TimeOnly), p.Err))
		}
	}
	if len(parts) == 0 {
		bad = append(bad, "no link was cut: the check would be vacuous")
	}
	return bad
}

// printPartitions is the partitions' line of the summary.
func printPartitions(parts []Partition, slowed int) string {
	var givenUp, retaken time.Duration
	for _, p := range parts {
		givenUp, retaken = max(givenUp, p.GivenUp), max(retaken, p.Retaken)
	}
	return fmt.Sprintf("%d cuts of a worker's link; presence given up after at most %s (bound %s), taken back at most %s after the heal (bound %s); every link slowed %d times",
		len(parts), givenUp.Round(time.Millisecond), givenUpBound, retaken.Round(time.Millisecond), retakenBound, slowed)
}
