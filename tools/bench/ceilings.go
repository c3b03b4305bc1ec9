package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The ceilings a mode is a ratio to: what pgx and a bare HTTP handler do on
// this machine, with no service in the way.

// ceilings measures one-row inserts and point selects through pgx.
func ceilings(ctx context.Context, pool *pgxpool.Pool, cfg Config, out io.Writer) (Result, Result, error) {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_ceiling (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text NOT NULL)`); err != nil {
		return Result{}, Result{}, err
	}
	insert, err := measure(ctx, "ceiling: one-row INSERT (pgx)", cfg.Clients, cfg.Duration, out, insertRow(ctx, pool))
	if err != nil {
		return Result{}, Result{}, err
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM bench_ceiling`).Scan(&n); err != nil {
		return Result{}, Result{}, err
	}
	var i atomic.Int64
	sel, err := measure(ctx, "ceiling: point SELECT (pgx)", cfg.Clients, cfg.Duration, out, func() error {
		var v string
		return pool.QueryRow(ctx, `SELECT v FROM bench_ceiling WHERE id = $1`, 1+i.Add(1)%n).Scan(&v)
	})
	return insert, sel, err
}

// insertRow is the insert ceiling's op: one row, one statement.
func insertRow(ctx context.Context, pool *pgxpool.Pool) func() error {
	return func() error {
		_, err := pool.Exec(ctx, `INSERT INTO bench_ceiling (v) VALUES ('x')`)
		return err
	}
}

// bareHandler serves the two reference handlers: POST /insert reads the
// body and inserts a row, POST /select reads the body and selects one.
func bareHandler(pool *pgxpool.Pool) (*httptest.Server, error) {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT max(id) FROM bench_ceiling`).Scan(&n); err != nil {
		return nil, err
	}
	var i atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /insert", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if _, err := pool.Exec(r.Context(), `INSERT INTO bench_ceiling (v) VALUES ('x')`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("POST /select", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var v string
		if err := pool.QueryRow(r.Context(), `SELECT v FROM bench_ceiling WHERE id = $1`, 1+i.Add(1)%n).Scan(&v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	return httptest.NewServer(mux), nil
}
