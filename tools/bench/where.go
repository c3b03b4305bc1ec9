package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Where the time goes: for the modes that are explained (new keys,
// replays), the statements Postgres spent its time on, from
// pg_stat_statements when the server has it loaded, and the round trips the
// API made per request, counted on the wire.

// Statement is one normalized statement of a mode, as pg_stat_statements
// counts it.
type Statement struct {
	// PerRequest is how many times a request of the mode ran it.
	PerRequest float64
	// MeanMS is the server's mean execution time, in milliseconds.
	MeanMS float64
	// Share is its part of the server's execution time over the mode.
	Share float64
	Query string
}

// statStatements reads pg_stat_statements in the run's database. Its zero
// value, or one on a server without the extension loaded, reads nothing.
type statStatements struct {
	pool *pgxpool.Pool
}

// newStatStatements creates the extension in the run's database when the
// server has it loaded (shared_preload_libraries), and says so either way.
func newStatStatements(ctx context.Context, pool *pgxpool.Pool, out io.Writer) statStatements {
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		fmt.Fprintf(out, "bench: no pg_stat_statements (%v): round trips only\n", err)
		return statStatements{}
	}
	if _, err := pool.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		fmt.Fprintf(out, "bench: pg_stat_statements not loaded (%v): round trips only\n", err)
		return statStatements{}
	}
	return statStatements{pool: pool}
}

// reset forgets what came before a mode (the server's whole statistics:
// the bench owns the server while it runs).
func (s statStatements) reset(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

// topStatements is the statements of this database by the time the server
// spent on them, with the total of them all; a mode's reference's, which
// ran in turns with it, are not the mode's.
const topStatements = `
SELECT calls, mean_exec_time, total_exec_time / nullif(sum(total_exec_time) OVER (), 0), query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%bench_ceiling%'
ORDER BY total_exec_time DESC`

// top returns the n statements the server spent most time on since reset,
// counted per request of a mode that made requests.
func (s statStatements) top(ctx context.Context, n, requests int) ([]Statement, error) {
	if s.pool == nil || requests == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, topStatements)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var top []Statement
	for rows.Next() && len(top) < n {
		var (
			calls int64
			st    Statement
			share *float64
		)
		if err := rows.Scan(&calls, &st.MeanMS, &share, &st.Query); err != nil {
			return nil, err
		}
		st.PerRequest = float64(calls) / float64(requests)
		if share != nil {
			st.Share = *share
		}
		st.Query = strings.Join(strings.Fields(st.Query), " ")
		top = append(top, st)
	}
	return top, rows.Err()
}

// Explained is where one mode's time went.
type Explained struct {
	Mode string
	// RoundTrips is the API's round trips to Postgres per request, counted
	// on the wire in a pass of its own; zero for a mode not counted so.
	RoundTrips float64
	// Statements is the top of pg_stat_statements over the mode, when loaded.
	Statements []Statement
}

// PrintExplained writes where each explained mode's time went.
func PrintExplained(out io.Writer, explained []Explained) {
	for _, e := range explained {
		if e.RoundTrips > 0 {
			fmt.Fprintf(out, "\n%s: %.2f round trips to Postgres per request (the API's, counted on the wire)\n", e.Mode, e.RoundTrips)
		} else {
			fmt.Fprintf(out, "\n%s: the statements of every process (API, worker, processor)\n", e.Mode)
		}
		if len(e.Statements) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  per request\tmean\tof the server's time\tstatement")
		for _, s := range e.Statements {
			q := s.Query
			if len(q) > 100 {
				q = q[:97] + "..."
			}
			fmt.Fprintf(tw, "  %.2f\t%.3f ms\t%.0f%%\t%s\n", s.PerRequest, s.MeanMS, 100*s.Share, q)
		}
		_ = tw.Flush()
	}
}

// wire forwards connections to a Postgres server and counts the round trips
// its clients make: the messages that make the server answer, a Sync (which
// ends an extended-protocol exchange, a batch's included) or a simple Query.
type wire struct {
	ln     net.Listener
	server string
	trips  atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// newWire listens on the loopback for connections to the server databaseURL
// names, and returns the URL that goes through it (without TLS, whose
// messages it could not read).
func newWire(databaseURL string) (*wire, string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	w := &wire{ln: ln, server: u.Host}
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	w.wg.Go(w.serve)
	return w, u.String(), nil
}

func (w *wire) serve() {
	for {
		client, err := w.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.server)
		if err != nil {
			client.Close()
			continue
		}
		w.mu.Lock()
		w.conns = append(w.conns, client, server)
		w.mu.Unlock()
		w.wg.Go(func() { _, _ = io.Copy(client, server); client.Close() })
		w.wg.Go(func() { _ = w.count(server, client); server.Close() })
	}
}

// count copies what a client sends to the server, message by message,
// counting the messages that end a round trip.
func (w *wire) count(server io.Writer, client io.Reader) error {
	head := make([]byte, 8)
	// The startup message, after any SSLRequest refused: a length and a
	// code, then the rest.
	for {
		if _, err := io.ReadFull(client, head); err != nil {
			return err
		}
		if _, err := server.Write(head); err != nil {
			return err
		}
		n, code := binary.BigEndian.Uint32(head), binary.BigEndian.Uint32(head[4:])
		if _, err := io.CopyN(server, client, int64(n)-8); err != nil {
			return err
		}
		const sslRequest, gssRequest = 80877103, 80877104
		if code != sslRequest && code != gssRequest {
			break
		}
	}
	// Then typed messages: a byte and a length that counts itself.
	for {
		if _, err := io.ReadFull(client, head[:5]); err != nil {
			return err
		}
		if head[0] == 'S' || head[0] == 'Q' {
			w.trips.Add(1)
		}
		if _, err := server.Write(head[:5]); err != nil {
			return err
		}
		if _, err := io.CopyN(server, client, int64(binary.BigEndian.Uint32(head[1:5]))-4); err != nil {
			return err
		}
	}
}

// Close stops listening and cuts every connection.
func (w *wire) Close() error {
	err := w.ln.Close()
	w.mu.Lock()
	for _, c := range w.conns {
		_ = c.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Hop is one step of a payment end to end, between two moments the database
// stamped (each its transaction's now()), over a mode's payments.
type Hop struct {
	Name          string
	P50, P90, P99 time.Duration
}

// paymentHops is where a payment's time went between its first phase and
// the transaction that finished it, by the database's clock: the first
// phase's transaction (the key's created_at), the relay's (the job's
// created_at), River's fetch (attempted_at), the processor's charge (its
// created_at) and the worker's finishing transaction (finished_at). A
// measurement tool may read River's table; the service never does.
const paymentHops = `
WITH h AS (
	SELECT j.created_at - k.created_at AS relay, j.attempted_at - j.created_at AS fetched,
		c.created_at - j.attempted_at AS charge, k.finished_at - c.created_at AS finish,
		k.finished_at - k.created_at AS whole
	FROM idempotency_keys k
	JOIN river_job j ON j.id = k.job_id
	JOIN payments p ON p.idempotency_key_id = k.id
	JOIN processor.charges c ON c.payment_id = p.id
	WHERE k.key LIKE $1 || '%' AND k.finished_at IS NOT NULL)
SELECT name, percentile_disc(0.5) WITHIN GROUP (ORDER BY d), percentile_disc(0.9) WITHIN GROUP (ORDER BY d),
	percentile_disc(0.99) WITHIN GROUP (ORDER BY d)
FROM h, LATERAL (VALUES (1, 'first phase to the relay (the doorbell, the relay''s LISTEN)', relay),
	(2, 'relay to River''s fetch (the relay''s commit, River''s notification)', fetched),
	(3, 'fetch to the processor''s charge (the job''s read, the call)', charge),
	(4, 'charge to the finishing transaction (the answer back)', finish),
	(5, 'first phase to the finishing transaction', whole)) AS v (n, name, d)
GROUP BY n, name ORDER BY n`

// hops reads where the time of the payments whose keys start with prefix
// went.
func hops(ctx context.Context, pool *pgxpool.Pool, prefix string) ([]Hop, error) {
	rows, err := pool.Query(ctx, paymentHops, prefix)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Hop, error) {
		var h Hop
		return h, row.Scan(&h.Name, &h.P50, &h.P90, &h.P99)
	})
}

// PrintHops writes where a mode's payments spent their time, by the
// database's clock.
func PrintHops(out io.Writer, mode string, hops []Hop) {
	printHops(out, mode+": where a payment's time went, by the database's clock", hops)
}

// PrintClientHops writes where a mode's requests spent the time the
// database's clock does not see.
func PrintClientHops(out io.Writer, mode string, hops []Hop) {
	printHops(out, mode+": and outside it, by the client's clock and a listener's (this machine's, as the database's)", hops)
}

func printHops(out io.Writer, title string, hops []Hop) {
	if len(hops) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%s\n", title)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp90\tp99\t")
	for _, h := range hops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", h.Name, h.P50.Round(10*time.Microsecond), h.P90.Round(10*time.Microsecond), h.P99.Round(10*time.Microsecond))
	}
	_ = tw.Flush()
}
