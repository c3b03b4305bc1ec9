package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction whose BEGIN costs no round trip of its own: it is
// sent with the transaction's first statement, in one batch, and its COMMIT
// may be sent with the last statements (CommitWith). It implements pgx.Tx,
// so that River's InsertTx runs in it like in any other. A transaction that
// ran nothing commits and rolls back without a word to the server.
type Tx struct {
	conn  *pgxpool.Conn
	begun bool
	done  bool
}

var _ pgx.Tx = (*Tx)(nil)

// Begin takes a connection from pool for a transaction that is begun by its
// first statement. The caller must Commit, CommitWith or Rollback it, which
// returns the connection.
func Begin(ctx context.Context, pool *pgxpool.Pool) (*Tx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &Tx{conn: conn}, nil
}

// errNested reports a savepoint asked of a Tx, which nothing here needs.
var errNested = errors.New("database: savepoints are not supported by this transaction")

// Begin implements pgx.Tx; savepoints are not supported.
func (t *Tx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

// begin sends what is queued in b, after a BEGIN when the transaction has
// not begun yet, and returns its results past the BEGIN's.
func (t *Tx) begin(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if t.begun {
		return t.conn.SendBatch(ctx, b), nil
	}
	with := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, b.QueuedQueries...)}
	br := t.conn.SendBatch(ctx, with)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("begin: %w", err)
	}
	t.begun = true
	return br, nil
}

// Exec implements pgx.Tx.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun && !t.done {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.begin(ctx, b)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// Query implements pgx.Tx.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun && !t.done {
		return t.conn.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br, err := t.begin(ctx, b)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements pgx.Tx.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

// SendBatch implements pgx.Tx: the BEGIN, when it is still to be sent, goes
// first in the same batch.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := t.begin(ctx, b)
	if err != nil {
		return &failedBatch{err: err}
	}
	return br
}

// CommitWith sends the statements queued in b and the COMMIT in one batch,
// with the BEGIN too when the transaction has not begun: a transaction of
// one batch costs one round trip. When a statement of b fails, the server
// skips the rest and the COMMIT: the transaction is left to roll back, and
// the error is returned after the batch's callbacks have run.
func (t *Tx) CommitWith(ctx context.Context, b *pgx.Batch) error {
	commit := b.Queue("COMMIT")
	var tag pgconn.CommandTag
	commit.Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	br, err := t.begin(ctx, b)
	if err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	t.release()
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Commit implements pgx.Tx.
func (t *Tx) Commit(ctx context.Context) error {
	switch {
	case t.done:
		return pgx.ErrTxClosed
	case !t.begun:
		t.release()
		return nil
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	t.release()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback implements pgx.Tx. A connection the ROLLBACK could not reach is
// closed rather than returned to the pool in a transaction.
func (t *Tx) Rollback(ctx context.Context) error {
	switch {
	case t.done:
		return pgx.ErrTxClosed
	case !t.begun:
		t.release()
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	if err != nil {
		_ = t.conn.Conn().Close(ctx)
	}
	t.release()
	return err
}

// release returns the connection to the pool, which closes it if it is
// still in a transaction or busy.
func (t *Tx) release() {
	t.done = true
	t.conn.Release()
}

// CopyFrom implements pgx.Tx.
func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if !t.begun {
		if _, err := t.Exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// LargeObjects implements pgx.Tx; large objects are not supported.
func (t *Tx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare implements pgx.Tx.
func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// Conn implements pgx.Tx.
func (t *Tx) Conn() *pgx.Conn { return t.conn.Conn() }

// batchRows are the rows of a statement sent in a batch with the BEGIN:
// closing them closes the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// row is the first row of rows, as pgx's QueryRow reads it.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch is the results of a batch that could not be sent.
type failedBatch struct{ err error }

func (f *failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f *failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f *failedBatch) QueryRow() pgx.Row                { return &row{err: f.err} }
func (f *failedBatch) Close() error                     { return f.err }
func (f *failedBatch) Tx() pgx.Tx                       { return nil }
