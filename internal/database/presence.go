package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/timer"
)

// PresenceClass is the class of the advisory locks that mark processes
// alive (the first key of pg_advisory_lock(int, int)): no other lock of the
// service takes a two-key lock, so none can collide with a presence.
const PresenceClass int32 = 0x70726573 // "pres"

// Presence marks a process alive in the database: a transaction-level
// advisory lock on (PresenceClass, ID), taken in a transaction that its
// connection keeps open for as long as the process lives. Postgres releases
// it the moment that transaction ends, and a transaction ends with its
// session, however the process died (SIGKILL, its host gone, the connection
// cut; a host or network gone silent within the bounds of bounds.go, which
// the transaction sets on the server's side too). A transaction is also the one thing no pooler shares: PgBouncer, in
// any mode, gives a server connection in a transaction to that client alone
// and closes it when the client goes mid-transaction, so a presence cannot
// sit on a backend another client's statements run on (a session lock
// there is re-entered by whoever gets the backend next, and outlives its
// process). What a process records with its ID is its own for as long as it
// lives: another asks whether the holder lives with
// pg_try_advisory_xact_lock(PresenceClass, id), which takes the lock (until
// its transaction ends) only when nobody holds it. Nothing relies on a
// clock: the database decides.
//
// The transaction writes nothing, so it has no transaction id and, between
// its pings, no snapshot: it holds back neither vacuum nor a concurrent
// index build. It shows in pg_stat_activity as "idle in transaction" under
// application_name PresenceApplication, exempt from the session's
// idle_in_transaction_session_timeout and transaction_timeout.
//
// Should the connection drop while the process lives, Presence connects
// again and takes the lock back; in between, others take the process for
// dead, which must only ever cost what a dead process's records cost. A
// failover drops every presence at once, and each is taken back on the new
// primary a few seconds apart: so the records made before the oldest
// session now on the database began (pg_stat_activity's backend_start) are
// not judged, and a process whose presence is not back yet records what it
// does as nobody's.
type Presence struct {
	ID     int32
	url    string
	logger *slog.Logger
	conn   *pgx.Conn // nil while lost; in the lock's transaction
	stop   context.CancelFunc
	done   chan struct{}
}

// PresenceApplication is the application_name of a presence's session.
const PresenceApplication = "payments-presence"

// presenceCheck is how often Presence checks that its lock's session is
// still there.
const presenceCheck = 2 * time.Second

// HoldPresence takes a presence on a fresh random ID, connecting to url,
// which must reach Postgres past any pooler in transaction mode (a session
// lock taken through one would belong to whichever client got the server
// connection next). It keeps it until Close. It returns
// ErrPresenceThroughPooler, holding nothing, when it finds such a pooler.
func HoldPresence(ctx context.Context, url string, logger *slog.Logger) (*Presence, error) {
	p := &Presence{url: url, logger: logger, done: make(chan struct{})}
	for range 10 {
		p.ID = rand.Int32N(1<<31-1) + 1
		conn, err := p.lock(ctx)
		if errors.Is(err, errPresenceTaken) {
			continue
		}
		if err != nil {
			return nil, err
		}
		p.conn = conn
		keep, stop := context.WithCancel(context.WithoutCancel(ctx))
		p.stop = stop
		go p.keep(keep)
		return p, nil
	}
	return nil, errors.New("hold presence: ten random IDs were all taken")
}

var errPresenceTaken = errors.New("the presence ID is held by another session")

// ErrPresenceThroughPooler reports that the presence's URL leads through a
// pooler that hands one server session to several clients between their
// transactions (PgBouncer in transaction or statement mode). A presence
// taken there would sit on a backend that other clients' transactions run
// on too, and advisory locks are re-entrant within a backend: one of them
// would take pg_try_advisory_xact_lock on it and the live process for dead.
var ErrPresenceThroughPooler = errors.New("the presence's connection reaches Postgres through a pooler " +
	"in transaction or statement mode, which shares its server session with other clients")

// lock connects and takes the lock on p.ID, in a transaction it leaves
// open: the one place a presence is taken, at start and when taken back.
// A try is bounded as one connection attempt is: a server that takes the
// connection and answers nothing fails it, and it is tried again.
func (p *Presence) lock(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(p.url) // takes the pool's settings out
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	bound(&cfg.ConnConfig.Config)
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout)
	defer cancel()
	// Every statement on the simple protocol: no prepared statement is left
	// on a server connection a pooler hands on.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.ConnConfig.RuntimeParams["application_name"] = PresenceApplication
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("hold presence: %w", err)
	}
	// The presence would be safe through a pooler that shares sessions;
	// what else needs this URL's session (LISTEN, River's client) is not.
	if err := ownSession(ctx, conn, cfg.ConnConfig); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("hold presence: %w", err)
	}
	var ok bool
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(exemptFromTimeouts)
	// The server's side bounded for the transaction only: behind a pooler
	// the check above cannot see, the session is not the presence's.
	b.Queue(serverBounds, serverBoundsArgs(true)...)
	b.Queue(`SELECT pg_try_advisory_xact_lock($1, $2)`, PresenceClass, p.ID).QueryRow(func(row pgx.Row) error { return row.Scan(&ok) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil || !ok {
		conn.Close(ctx)
		if err == nil {
			err = errPresenceTaken
		}
		return nil, fmt.Errorf("hold presence: %w", err)
	}
	return conn, nil
}

// exemptFromTimeouts lifts, for the presence's transaction only, the
// server's bounds on a transaction left open, on the versions that have
// them.
const exemptFromTimeouts = `SELECT set_config(name, '0', true) FROM pg_settings
WHERE name IN ('idle_in_transaction_session_timeout', 'transaction_timeout')`

// ownSession returns ErrPresenceThroughPooler when conn's server session
// also serves another client, as far as it can tell: another connection to the same place, opened
// while conn is open and idle, runs on the same backend. Postgres never
// gives two open connections one backend, so equal pids prove a pooler that
// moves server sessions between clients; PgBouncer gives a transaction the
// server connection released last, conn's. Different pids prove nothing (a
// busy pooler may hand out another, poolers behind a round-robin are each
// asked once), which lets such a pooler pass: the presence stays safe, being
// a transaction's, and only what else needs a session is left to the
// operator's DATABASE_SESSION_URL.
func ownSession(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig) error {
	pid, err := backendPID(ctx, conn)
	if err != nil {
		return fmt.Errorf("read the backend's pid: %w", err)
	}
	probe, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to compare backends: %w", err)
	}
	defer probe.Close(ctx)
	other, err := backendPID(ctx, probe)
	if err != nil {
		return fmt.Errorf("read the other backend's pid: %w", err)
	}
	if other == pid {
		return fmt.Errorf("%w (backend %d served two open connections)", ErrPresenceThroughPooler, pid)
	}
	return nil
}

// backendPID is the pid of the backend that runs conn's statement. It is
// sent on the simple protocol: through a pooler, a named prepared statement
// would stay on the server connection, where the probe's would collide
// with it.
func backendPID(ctx context.Context, conn *pgx.Conn) (pid int32, err error) {
	err = conn.QueryRow(ctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	return pid, err
}

// keep checks the lock's session every presenceCheck and takes the lock
// back on a new one when it is gone, until ctx ends.
func (p *Presence) keep(ctx context.Context) {
	defer close(p.done)
	timer.Every(ctx, presenceCheck, func() {
		if p.conn != nil && p.alive(ctx) {
			return
		}
		if p.conn != nil {
			p.logger.Warn("presence lost: its connection dropped; taking it back", "presence", p.ID)
			// Its socket closed now, not after pgx's cancel request and
			// drain (15 s): behind a proxy or pooler that holds the
			// connection, the server frees the lock once the close reaches it.
			p.conn.PgConn().Conn().Close()
			p.conn.Close(ctx)
			p.conn = nil
		}
		conn, err := p.lock(ctx)
		switch {
		case err == nil:
			p.conn = conn
			p.logger.Info("presence taken back", "presence", p.ID)
		case errors.Is(err, ErrPresenceThroughPooler):
			// The URL now leads through such a pooler: the presence stays
			// lost, and the operator is told why at every try.
			p.logger.Error("presence not taken back", "presence", p.ID, "err", err)
		}
	})
}

// alive reports whether the lock's transaction still answers, within
// presenceCheck: a statement in an aborted transaction fails, as one on a
// dropped connection does.
func (p *Presence) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, presenceCheck)
	defer cancel()
	_, err := p.conn.Exec(ctx, `SELECT 1`)
	return err == nil
}

// Close gives the presence up: the lock's session ends.
func (p *Presence) Close() {
	p.stop()
	<-p.done // keep has returned: p.conn is ours
	if p.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.conn.Close(ctx)
		p.conn = nil
	}
}
