package database

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bounds on a peer that vanishes without a reset (its host gone, the
// network between cut), which would otherwise hold a connection for the
// kernel's retransmission timeout, some fifteen minutes. Every connection
// this package makes has them (bound, boundPool):
//
//   - ConnectTimeout bounds a whole connection attempt (dial, TLS, startup,
//     authentication) when the URL sets no connect_timeout;
//   - an idle connection is probed after KeepaliveIdle, then every
//     KeepaliveInterval, and TCP_USER_TIMEOUT (UserTimeout) drops a
//     connection whose sent data, or probes, have gone unanswered that
//     long: a silent peer ends a connection, idle or not, within
//     UserTimeout plus one KeepaliveInterval (17 s);
//   - PingTimeout bounds the ping a pool sends a connection idle for a
//     second before handing it out, when the URL sets no pool_ping_timeout;
//     a connection that does not answer is dropped and another taken.
//
// The kernel's bounds need a peer that stops acknowledging; one that
// acknowledges and forwards nothing (a proxy or pooler whose far side is
// cut) is bounded by deadlines instead: the presence's ping
// (presenceCheck), the listener's (listenPing), the pool's, and the
// callers' own.
const (
	ConnectTimeout    = 10 * time.Second
	KeepaliveIdle     = 5 * time.Second
	KeepaliveInterval = 2 * time.Second
	KeepaliveCount    = 5
	UserTimeout       = 15 * time.Second
	PingTimeout       = 3 * time.Second
)

// bound gives cfg's connections the bounds on a silent peer: keepalives,
// TCP_USER_TIMEOUT and a connect timeout unless the URL set one.
func bound(cfg *pgconn.Config) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = ConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: KeepaliveIdle, Interval: KeepaliveInterval, Count: KeepaliveCount,
		},
		Control: setUserTimeout,
	}
	cfg.DialFunc = d.DialContext
}

// boundPool is bound for a pool's connections, and bounds the ping that
// checks an idle one before it is handed out. Unless the pool is through
// a pooler in transaction mode, whose server connections are not its
// own, each session's server side is given the same bounds
// (serverBounds): Postgres ends the session of a client whose host went
// silent, and releases its locks, within UserTimeout and a probe, where
// its defaults (the kernel's, two hours of idle) would hold them.
func boundPool(cfg *pgxpool.Config, pooled bool) {
	bound(&cfg.ConnConfig.Config)
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = PingTimeout
	}
	if !pooled {
		cfg.ConnConfig.AfterConnect = boundServer
	}
}

// serverBounds gives the server's side of a connection the bounds its
// client's side has (bound): for the session, or ($5) for the transaction
// only.
const serverBounds = `SELECT set_config('tcp_keepalives_idle', $1::text, $5::bool),
  set_config('tcp_keepalives_interval', $2::text, $5::bool),
  set_config('tcp_keepalives_count', $3::text, $5::bool),
  set_config('tcp_user_timeout', $4::text, $5::bool)`

// serverBoundsArgs are serverBounds' arguments, for the transaction only
// when local.
func serverBoundsArgs(local bool) []any {
	return []any{int(KeepaliveIdle / time.Second), int(KeepaliveInterval / time.Second), KeepaliveCount, UserTimeout.Milliseconds(), local}
}

// boundServer sets serverBounds for the session of a connection just made,
// below pgx's statement tracing: it is the connection's set-up, not a
// statement of the code's.
func boundServer(ctx context.Context, conn *pgconn.PgConn) error {
	args := serverBoundsArgs(false)
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = fmt.Appendf(nil, "%v", a)
	}
	if _, err := conn.ExecParams(ctx, serverBounds, params, nil, nil, nil).Close(); err != nil {
		return fmt.Errorf("bound the server's side: %w", err)
	}
	return nil
}
