package database_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/linkfault"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// A partition (linkfault's timeout toxic: connections held open, nothing
// passed, no reset) is what the kernel's bounds do not see from loopback,
// the proxy's kernel acknowledging all: these tests hold the deadlines to
// theirs. Each bound is the package's, with room for a loaded machine.
const (
	// presenceLost: the presence's ping fails (presenceCheck) and the
	// server, seeing its connection closed, frees the lock.
	presenceLost = 10 * time.Second
	// listenerLost: a quiet listener pings, and its ping goes unanswered.
	listenerLost = 15 * time.Second
	// healed: a connection attempt under way when the link heals fails by
	// its connect timeout, and the next one succeeds.
	healed = database.ConnectTimeout + 10*time.Second
)

// partitioned starts a link in front of db's server, closed when t ends,
// and returns it and db's URL through it.
func partitioned(t *testing.T, db *testdb.DB) (*linkfault.Link, string) {
	t.Helper()
	link, u, err := linkfault.Before(t.Name(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	return link, u
}

// TestPresencePartitioned: a worker cut off from the database without a
// reset gives its presence up within presenceLost, so that another can
// take its records for a dead process's; once the link heals, it takes the
// presence back on a new session within healed.
func TestPresencePartitioned(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	link, u := partitioned(t, db)
	p, err := database.HoldPresence(ctx, u, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	holder := func() int { return presenceHolder(t, db, p.ID) }
	first := holder()
	if first == 0 {
		t.Fatal("a presence just taken is not held")
	}
	if err := link.Partition(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	testwait.Within(t, presenceLost, "the partitioned presence given up", func() bool { return holder() == 0 })
	t.Logf("presence given up %s after the partition", time.Since(cut).Round(time.Millisecond))
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	testwait.Within(t, healed, "the presence taken back on a new session", func() bool {
		pid := holder()
		return pid != 0 && pid != first
	})
	t.Logf("presence taken back %s after the link healed", time.Since(healedAt).Round(time.Millisecond))
}

// TestListenPartitioned: a listener cut off without a reset, which hears
// nothing and would wait for ever, knows it within listenerLost; once the
// link heals it connects again within healed and says so (what was sent
// meanwhile is lost, and the caller looks for itself), and hears what is
// sent after.
func TestListenPartitioned(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	link, u := partitioned(t, db)
	pool, err := database.Open(context.Background(), u, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testio.Buffer
	var connects atomic.Int64
	heard := make(chan string, 16)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		stop()
		<-done
	})
	go func() {
		defer close(done)
		database.Listen(ctx, pool, "partition", slog.New(slog.NewTextHandler(&logs, nil)),
			func() { connects.Add(1) }, func(payload string) { heard <- payload })
	}()
	testwait.For(t, "the listener connected", func() bool { return connects.Load() == 1 })
	hears := func(payload string) {
		t.Helper()
		testwait.Poll(t, time.Now().Add(20*time.Second), 100*time.Millisecond, func() error {
			db.Exec(t, `SELECT pg_notify('partition', $1)`, payload)
			select {
			case got := <-heard:
				if got == payload {
					return nil
				}
			case <-time.After(50 * time.Millisecond):
			}
			return errNotHeard
		})
	}
	hears("before")

	if err := link.Partition(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	testwait.Within(t, listenerLost, "the partitioned listener's loss logged", func() bool {
		return strings.Contains(logs.String(), "listener lost its connection")
	})
	t.Logf("listener knew it was cut off %s after the partition", time.Since(cut).Round(time.Millisecond))
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	testwait.Within(t, healed, "the listener connected again", func() bool { return connects.Load() == 2 })
	t.Logf("listener connected again %s after the link healed", time.Since(healedAt).Round(time.Millisecond))
	hears("after")
}

var errNotHeard = errors.New("the notification was not heard")

// TestPoolPartitioned: through a link cut without a reset, a pool's
// acquisition fails within its bounds, the idle connection's ping
// (PingTimeout) and a new connection's attempt (ConnectTimeout), and
// once the link heals the pool answers again within healed.
func TestPoolPartitioned(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	link, u := partitioned(t, db)
	ctx := context.Background()
	pool, err := database.Connect(ctx, u, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	used := time.Now()
	if err := link.Partition(); err != nil {
		t.Fatal(err)
	}
	// pgxpool pings a connection on its way out only after it has been idle
	// a second: that is the condition to wait for.
	testwait.For(t, "the pool's connection idle for a second", func() bool { return time.Since(used) > time.Second })
	cut := time.Now()
	// Cancelled when the test ends, before the pool is closed, should the
	// ping wait for ever.
	pinging, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	failed := make(chan error, 1)
	go func() { failed <- pool.Ping(pinging) }()
	bound := database.PingTimeout + database.ConnectTimeout + 5*time.Second
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a ping through a partitioned link succeeded")
		}
		t.Logf("acquisition failed %s after the partition: %v", time.Since(cut).Round(time.Millisecond), err)
	case <-time.After(bound):
		t.Fatalf("an acquisition through a partitioned link still waits after %s", bound)
	}
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	testwait.Poll(t, healedAt.Add(healed), 100*time.Millisecond, func() error { return pool.Ping(ctx) })
	t.Logf("pool answered again %s after the link healed", time.Since(healedAt).Round(time.Millisecond))
}

// testWriter writes a logger's lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestServerBounds: a pool's session, and a presence's transaction, have
// on the server's side the bounds the client's side has, so that Postgres
// ends the session of a client gone silent within the same bound.
func TestServerBounds(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	want := map[string]string{
		"tcp_keepalives_idle":     fmt.Sprint(int(database.KeepaliveIdle / time.Second)),
		"tcp_keepalives_interval": fmt.Sprint(int(database.KeepaliveInterval / time.Second)),
		"tcp_keepalives_count":    fmt.Sprint(database.KeepaliveCount),
		"tcp_user_timeout":        fmt.Sprint(database.UserTimeout.Milliseconds()) + "ms",
	}
	for name, value := range want {
		var got string
		if err := pool.QueryRow(ctx, `SELECT setting || CASE WHEN unit = 'ms' THEN 'ms' ELSE '' END FROM pg_settings WHERE name = $1`, name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != value {
			t.Errorf("the pool's session has %s = %s, want %s", name, got, value)
		}
	}
}
