package bench

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/idempotency"
)

// timeline times what the database's clock cannot see of a mode's
// payments: each request by the client's clock, from its sending to its
// answer, and each key's announcement (idempotency.Announcer) by the clock
// of a listener of its own. Beside the keys' own stamps, they split a
// request's time before its first phase and after its finishing
// transaction. The clocks are one when the server runs on this machine, as
// make bench's does.
type timeline struct {
	mu       sync.Mutex
	requests map[string][2]time.Time // by key: sent, answered
	heard    map[int64]time.Time     // by key id: the announcement's arrival
}

func newTimeline() *timeline {
	return &timeline{requests: map[string][2]time.Time{}, heard: map[int64]time.Time{}}
}

// listen records the announcements of finished keys until the returned
// stop is called; it returns once listening.
func (tl *timeline) listen(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	listening := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		idempotency.Announcements(ctx, pool, logger, func() { once.Do(func() { close(listening) }) }, tl.hear)
	})
	stop = func() { cancel(); wg.Wait() }
	select {
	case <-listening:
		return stop, nil
	case <-time.After(10 * time.Second):
		stop()
		return nil, errors.New("the announcements' listener did not connect in 10 s")
	}
}

func (tl *timeline) hear(id int64) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.heard[id]; !ok {
		tl.heard[id] = now
	}
}

// send sends a request under key by post, timing it.
func (tl *timeline) send(key string, post func(key string) (int, error)) (int, error) {
	sent := time.Now()
	status, err := post(key)
	answered := time.Now()
	tl.mu.Lock()
	tl.requests[key] = [2]time.Time{sent, answered}
	tl.mu.Unlock()
	return status, err
}

// timedKeys are the stamps of the finished keys whose names start with $1:
// their first phase's transaction and their finishing one.
const timedKeys = `SELECT key, id, created_at, finished_at FROM idempotency_keys
WHERE key LIKE $1 || '%' AND finished_at IS NOT NULL`

// hops reads where the time of the keys named with prefix went outside the
// database's clock: before the first phase, between the finishing
// transaction and its announcement, and from there to the answer; and the
// whole of each request, by the client.
func (tl *timeline) hops(ctx context.Context, pool *pgxpool.Pool, prefix string) ([]Hop, error) {
	rows, err := pool.Query(ctx, timedKeys, prefix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var before, announced, answered, whole []time.Duration
	for rows.Next() {
		var key string
		var id int64
		var created, finished time.Time
		if err := rows.Scan(&key, &id, &created, &finished); err != nil {
			return nil, err
		}
		r, ok := tl.requests[key]
		if !ok {
			continue
		}
		before, whole = append(before, created.Sub(r[0])), append(whole, r[1].Sub(r[0]))
		if h, ok := tl.heard[id]; ok {
			announced, answered = append(announced, h.Sub(finished)), append(answered, r[1].Sub(h))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return []Hop{
		hop("the request to its first phase (HTTP, the key's read)", before),
		hop("the finishing transaction to its announcement (its commit, the announcer)", announced),
		hop("the announcement to the answer (the waiter's read, HTTP)", answered),
		hop("the request to its answer, by the client", whole),
	}, nil
}

func hop(name string, d []time.Duration) Hop {
	h := Hop{Name: name}
	h.P50, h.P90, h.P99 = percentiles(d)
	return h
}

// percentiles sorts d and returns its 50th, 90th and 99th percentiles; zero
// when d is empty.
func percentiles(d []time.Duration) (p50, p90, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return pct(0.50), pct(0.90), pct(0.99)
}
