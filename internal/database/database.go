// Package database opens connection pools, creates the database when it is
// missing, applies the migrations and translates driver errors once, at the edge.
package database

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTX is what query functions take, so that they run alike on a pool and
// inside a transaction owned by the caller.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Open opens a pool of at most maxConns connections (0: pgx's default, the
// larger of 4 and the CPUs, or the URL's pool_max_conns) without waiting for
// the database: connections are made when needed, so a server can start, and
// fail closed, while it is down.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, maxConns, false)
}

// OpenPooled opens a pool, as Open does, through a pooler in transaction
// mode (PgBouncer, or a cloud pooler that behaves like it), which hands each
// transaction whatever server connection is free: nothing may rely on a
// session. pgx's default prepares named statements per connection, which
// the next transaction's connection does not have; here it caches only
// their descriptions and sends each on the unnamed statement, still one
// round trip, unless the URL chose a mode (default_query_exec_mode).
func OpenPooled(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return open(ctx, url, maxConns, true)
}

func open(ctx context.Context, url string, maxConns int32, pooled bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	boundPool(cfg, pooled)
	if pooled && cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}

// Connect opens a pool, as Open does, and checks that the database answers.
func Connect(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return connect(ctx, url, maxConns, false)
}

// ConnectPooled opens a pool through a pooler in transaction mode, as
// OpenPooled does, and checks that the database answers.
func ConnectPooled(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return connect(ctx, url, maxConns, true)
}

func connect(ctx context.Context, url string, maxConns int32, pooled bool) (*pgxpool.Pool, error) {
	pool, err := open(ctx, url, maxConns, pooled)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// EnsureDatabase creates the database named in url when it does not exist,
// connecting to the server's postgres database to do so.
func EnsureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	bound(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to server: %w", err)
	}
	defer conn.Close(ctx)

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && !IsCode(err, "42P04") { // duplicate_database: created meanwhile
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// IsCode reports whether err is a Postgres error with the given SQLSTATE.
func IsCode(err error, sqlstate string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstate
}

// IsDataException reports whether err is Postgres refusing a value (SQLSTATE
// class 22: invalid byte sequence, a NUL in text, a value out of range), that
// is, the data was at fault and not the database.
func IsDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// IsUnavailable reports whether err says only that the database went away:
// it could not be reached (a failed connection, a broken socket, a server
// shutting down or crashed), or it is a standby that refuses to write (a
// primary demoted by a failover: read_only_sql_transaction). The work may
// be retried once a primary accepts writes: the API answers 503, and a job
// that failed so spends none of its retry budget (package jobs). Whether
// the statement that failed so took effect is NotExecuted's to say: a
// connection lost after a COMMIT was sent may have lost only its answer.
func IsUnavailable(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
		pgErr      *pgconn.PgError
	)
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.SafeToRetry(err),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// Refused, reset or cut connections, and pgx's own word that the
		// statement was never sent.
		return true
	case errors.As(err, &pgErr):
		// admin_shutdown, crash_shutdown, cannot_connect_now,
		// read_only_sql_transaction and the connection_exception class.
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "25006":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	return false
}

// NotExecuted reports whether err, one IsUnavailable reports, also proves
// that the statement that failed took no effect: no connection was made,
// pgx reports that nothing was sent (pgconn.SafeToRetry), or the server
// answered it with an error, which aborts its transaction. Any other
// unavailable error, a connection reset or cut after the statement was
// sent, leaves the outcome unknown: a transaction whose COMMIT went out
// may have committed. So does a connection_exception (class 08) once
// connected: it is what a pooler answers in the server's place when it lost
// its server connection (PgBouncer's "server conn crashed?"), whatever it
// had sent on it.
func NotExecuted(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		pgErr      *pgconn.PgError
	)
	switch {
	case !IsUnavailable(err):
		return false
	case errors.As(err, &connectErr), pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pgErr):
		return !strings.HasPrefix(pgErr.Code, "08")
	}
	return false
}

// WentAway reports whether err, of work done under ctx, says that the
// database went away (IsUnavailable), not that ctx ran out: a statement
// cut by its caller's own deadline (a lock a stuck session holds, a query
// too slow) fails as a network timeout, and is the caller's failure, not
// an outage's.
func WentAway(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && IsUnavailable(err)
}

// CreateFresh creates the database name on the server of serverURL, for a
// run of its own (the chaos run, the benchmark), and returns its URL and a
// function that drops it.
func CreateFresh(ctx context.Context, serverURL, name string) (string, func(), error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	cfg.Database = "postgres"
	bound(&cfg.Config)
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("connect to the server: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		admin.Close(ctx)
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		admin.Close(ctx)
		return "", nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	drop := func() {
		defer admin.Close(context.Background())
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

// InBatches runs a statement that takes the batch size as $1 until it
// affects fewer rows than a batch, and returns how many it affected: a
// large delete in short transactions, none holding many locks for long.
func InBatches(ctx context.Context, db DBTX, sql string, batch int, args ...any) (int, error) {
	total := 0
	for {
		tag, err := db.Exec(ctx, sql, append([]any{batch}, args...)...)
		if err != nil {
			return total, err
		}
		total += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// Age runs query, which reads an age in seconds by the database's clock
// (extract(epoch FROM now() - …)), and returns it.
func Age(ctx context.Context, db DBTX, query string) (time.Duration, error) {
	var seconds float64
	if err := db.QueryRow(ctx, query).Scan(&seconds); err != nil {
		return 0, fmt.Errorf("read age: %w", err)
	}
	return time.Duration(seconds * float64(time.Second)), nil
}
