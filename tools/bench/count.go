package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/tenants"
)

// The modes Count runs, a request at a time: a replay of one finished key,
// a new key answered at once (the worker stopped), and the bare one-SELECT
// handler, the replays' reference in make bench.
const (
	CountReplay = "replay"
	CountNewKey = "new key"
	CountBare   = "bare select"
)

// CountModes are Count's modes, the reference last.
var CountModes = []string{CountReplay, CountNewKey, CountBare}

// countKey is the finished key Count replays.
const countKey = "count-replay"

// PrepareCount readies the migrated database at url for Count: the demo
// tenants, the bare handler's rows and a finished key to replay, made end
// to end.
func PrepareCount(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := (&tenants.Store{DB: pool}).SeedDemos(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_ceiling (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text NOT NULL);
		INSERT INTO bench_ceiling (v) SELECT 'x' FROM generate_series(1, 1000)`); err != nil {
		return err
	}
	st, err := start(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer st.stop()
	st.startWorker(ctx)
	c := sender{http: &http.Client{Timeout: 30 * time.Second}}
	if status, err := c.post(st.apiURL+"/v1/payments", countKey, "wait=10"); err != nil || status != http.StatusCreated {
		return fmt.Errorf("make the key to replay: %d, %v", status, err)
	}
	return nil
}

// Count sends n requests of mode, one at a time, to the services built as
// Run builds them (the worker stopped), in this process, on a database
// PrepareCount readied: what a request costs this process, without the
// noise of concurrency, for a tool that counts instructions (callgrind). It
// returns the heap allocations the process made while the requests ran.
func Count(ctx context.Context, url, mode string, n int) (uint64, error) {
	allocs, err := count(ctx, url, mode, n)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", mode, err)
	}
	return allocs, nil
}

func count(ctx context.Context, url, mode string, n int) (uint64, error) {
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=4")
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	// Logged and traced as Run's services are: their cost is in the count.
	st, err := start(ctx, url, process.NewLogger(io.Discard, "json", slog.LevelInfo))
	if err != nil {
		return 0, err
	}
	defer st.stop()
	bare, err := bareHandler(pool)
	if err != nil {
		return 0, err
	}
	defer bare.Close()
	c := sender{http: &http.Client{Timeout: 30 * time.Second}}
	defer c.http.CloseIdleConnections()
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		var status, want int
		switch mode {
		case CountReplay:
			status, err = c.post(st.apiURL+"/v1/payments", countKey, "")
			want = http.StatusCreated
		case CountNewKey:
			status, err = c.post(st.apiURL+"/v1/payments", "count-"+stamp+"-"+strconv.Itoa(i), "respond-async")
			want = http.StatusAccepted
		case CountBare:
			status, err = c.post(bare.URL+"/select", "", "")
			want = http.StatusOK
		default:
			return 0, fmt.Errorf("no mode %q", mode)
		}
		if err == nil && status != want {
			err = fmt.Errorf("status %d, want %d", status, want)
		}
		if err != nil {
			return 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs, nil
}

// sender sends the bench's one request, a payment of 10.00 USD, to url
// under key, with a Prefer header unless prefer is empty.
type sender struct{ http *http.Client }

func (c sender) post(url, key, prefer string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url,
		bytes.NewReader([]byte(`{"amount": 1000, "currency": "USD", "payment_method": "pm_card_visa"}`)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key) // the bare handler's too, empty: the same request
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}
