package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/tools/hapg"
)

// Failover is one kill of the primary and what followed: the time from the
// kill (the primary's Patroni and postmaster dead) until a standby took
// writes (a transaction that takes an id commits on it directly and through
// HAProxy, where the service's pooler and sessions connect), and until the
// APIs answered a POST sent after the kill with 201, 202 or 402 (zero when
// the load ended first).
type Failover struct {
	Node             string
	Killed           time.Time
	Writable, Served time.Duration
	// Err is what kept the failover from completing: no new primary, or
	// the killed node not restarted.
	Err string
}

// records is a list that goroutines add to and read a copy of.
type records[T any] struct {
	mu   sync.Mutex
	list []T
}

func (r *records[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, v)
}

func (r *records[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.list...)
}

// redacted is a database URL with its password masked, for the output.
func redacted(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// waitReachable waits until a connection through dbURL reaches its
// database. Through a multi-host URL, a standby named before the primary
// refuses a database it has not replayed yet, created a moment ago, and a
// client stops there (the failover profile).
func waitReachable(ctx context.Context, dbURL string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, dbURL)
		if err == nil {
			return conn.Close(ctx)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("reach the run's database: %w", err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// startCluster starts the Patroni pair the failover profile runs on, its
// script's lines in the run's logs, and returns it.
func startCluster(ctx context.Context, cfg Config) (*hapg.Cluster, error) {
	if err := hapg.Installed(); err != nil {
		return nil, fmt.Errorf("%w: the failover profile needs patroni and etcd-server (apt-get install -y --no-install-recommends patroni etcd-server)", err)
	}
	log, err := os.Create(filepath.Join(cfg.Logs, "hapg.log"))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(log, time.Now().Format(time.RFC3339Nano)+" "+format+"\n", args...)
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return hapg.Run(startCtx, logf)
}

// stopCluster stops the cluster, its daemons' logs kept with the run's
// (haproxy.log, pg1-patroni.log, pg1-log-postgresql.log…).
func stopCluster(cfg Config, c *hapg.Cluster) {
	var logs []string
	for _, n := range hapg.Nodes {
		logs = append(logs, n+"/patroni.log", n+"/log/postgresql.log")
	}
	keepLogs(cfg, c.Dir(), append(logs, "haproxy.log", "etcd.log")...)
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
	}
}

// upstream is where the pooler sends dbURL's connections: through HAProxy,
// which follows the primary, on a Patroni pair (c); else dbURL's server.
func upstream(c *hapg.Cluster, dbURL string) (string, error) {
	if c == nil {
		return dbURL, nil
	}
	u, err := url.Parse(c.ProxyURL())
	if err != nil {
		return "", err
	}
	db, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Path = db.Path
	return u.String(), nil
}

// path says how the APIs and workers reach Postgres, for the summary.
func path(p Profile, c *hapg.Cluster) string {
	var hops []string
	if p.PoolerConns > 0 {
		hops = append(hops, fmt.Sprintf("PgBouncer (transaction mode, %d server connections)", p.PoolerConns))
	}
	switch {
	case c != nil && p.PoolerConns > 0:
		hops = append(hops, "HAProxy (GET /primary)", "Patroni pair (synchronous); sessions through HAProxy")
	case c != nil:
		hops = append(hops, "Patroni pair (synchronous), multi-host URL")
	case p.PoolerConns > 0:
		hops = append(hops, "Postgres; sessions direct")
	default:
		hops = append(hops, "Postgres, direct")
	}
	return strings.Join(hops, " → ")
}

// failovers SIGKILLs the primary (its Patroni and its postmaster) every
// PrimaryKillEvery from the first kill on, until ctx ends. Before each kill
// it waits for a synchronous standby, so that the kill costs no commit:
// Patroni's synchronous mode promotes only a standby that has every commit
// acknowledged, and none while there is no such standby. After each kill it
// measures the outage and restarts the killed node, which rejoins as the
// standby (pg_rewind), whatever ctx says: the cluster is left whole.
func (s *stack) failovers(ctx context.Context, c *hapg.Cluster) {
	next := time.After(s.cfg.Profile.FirstPrimaryKill)
	for {
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
		next = time.After(s.cfg.Profile.PrimaryKillEvery)
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := c.WaitSyncStandby(waitCtx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.failoverLog.add(Failover{Killed: time.Now(), Err: fmt.Sprintf("no synchronous standby to fail over to: %v", err)})
			}
			continue
		}
		s.failoverLog.add(s.failover(context.WithoutCancel(ctx), c))
	}
}

// failover kills the primary, waits for the standby to take writes and
// restarts the killed node.
func (s *stack) failover(ctx context.Context, c *hapg.Cluster) Failover {
	node, err := c.KillPrimary()
	fo := Failover{Node: node, Killed: time.Now()}
	if err != nil {
		fo.Err = err.Error()
		return fo
	}
	s.kills["primary"].Add(1)
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.WaitPrimary(waitCtx); err != nil {
		fo.Err = err.Error()
	} else {
		fo.Writable = time.Since(fo.Killed)
	}
	if err := c.Restart(node); err != nil {
		fo.Err = strings.TrimSpace(fo.Err + "; restart " + node + ": " + err.Error())
	}
	// The APIs' first answer to a POST sent after the kill is read from
	// the recorder once the load is over (served).
	return fo
}

// served fills in each failover's Served from the answers the recorder saw
// to POSTs sent after the kill and before the load ended.
func served(fos []Failover, rec *recorder, loadEnd time.Time) []Failover {
	answers := rec.writes()
	for i := range fos {
		first := time.Time{}
		for _, a := range answers {
			if a.sent.After(fos[i].Killed) && a.sent.Before(loadEnd) && (first.IsZero() || a.at.Before(first)) {
				first = a.at
			}
		}
		if !first.IsZero() {
			fos[i].Served = first.Sub(fos[i].Killed)
		}
	}
	return fos
}

// checkFailovers is the failover profile's own invariant: the primary was
// killed at least min times, and each time a standby took writes and the
// killed node was restarted.
func checkFailovers(fos []Failover, minKills int) []string {
	var bad []string
	done := 0
	for _, fo := range fos {
		switch {
		case fo.Err != "":
			bad = append(bad, fmt.Sprintf("failover at %s: %s", fo.Killed.Format(time.TimeOnly), fo.Err))
		default:
			done++
		}
	}
	if done < minKills {
		bad = append(bad, fmt.Sprintf("%d failovers, want at least %d", done, minKills))
	}
	return bad
}

// answered is a POST's time of sending and of its answer.
type answered struct{ sent, at time.Time }

// writes is every POST answered 201, 202 or 402.
func (r *recorder) writes() []answered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]answered(nil), r.accepted...)
}

// printFailovers writes one line per failover.
func printFailovers(fos []Failover) string {
	var parts []string
	for _, fo := range fos {
		if fo.Err != "" {
			parts = append(parts, "failed: "+fo.Err)
			continue
		}
		served := "the load over first"
		if fo.Served > 0 {
			served = fo.Served.Round(100 * time.Millisecond).String()
		}
		parts = append(parts, fmt.Sprintf("%s writable after %s, APIs answering after %s", fo.Node,
			fo.Writable.Round(100*time.Millisecond), served))
	}
	return strings.Join(parts, "; ")
}
