package idempotency

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/timer"
)

// Announcer wakes the requests waiting for keys that finished: after the
// finishing transactions commit, it sends their ids on the finished channel,
// many to a notification. Notifying from each finishing transaction would
// serialise those commits: a transaction that notifies holds Postgres's one
// notification lock until its commit is flushed, so no two can share a WAL
// flush. One notification per Cooldown carries every id finished meanwhile.
// A notification lost (a crash between the commit and the send) costs the
// waiter its poll interval, never a wrong answer: waiters read the key.
type Announcer struct {
	db       *pgxpool.Pool
	cooldown time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	pending []int64
	poke    chan struct{}
}

// NewAnnouncer returns an announcer that sends at most one notification per
// cooldown; Run sends them.
func NewAnnouncer(pool *pgxpool.Pool, cooldown time.Duration, logger *slog.Logger) *Announcer {
	return &Announcer{db: pool, cooldown: cooldown, logger: logger, poke: make(chan struct{}, 1)}
}

// Finished announces that key id has finished; its transaction must have
// committed. It never blocks. A nil Announcer announces nothing.
func (a *Announcer) Finished(id int64) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.pending = append(a.pending, id)
	a.mu.Unlock()
	select {
	case a.poke <- struct{}{}:
	default: // a send is already due
	}
}

const announce = `SELECT pg_notify('` + finishedChannel + `', $1)`

// maxPayload keeps a notification under Postgres's 8000-byte limit.
const maxPayload = 7000

// Run sends the announcements until ctx ends.
func (a *Announcer) Run(ctx context.Context) {
	timer.Throttle(ctx, a.poke, a.cooldown, func(ctx context.Context) {
		a.mu.Lock()
		ids := a.pending
		a.pending = nil
		a.mu.Unlock()
		for _, payload := range payloads(ids) {
			if _, err := a.db.Exec(ctx, announce, payload); err != nil && ctx.Err() == nil {
				a.logger.Warn("announce finished keys: their waiters will poll", "keys", strings.Count(payload, ",")+1, "err", err)
			}
		}
	})
}

// payloads joins ids with commas, in as few notifications as fit.
func payloads(ids []int64) []string {
	var out []string
	var b strings.Builder
	for _, id := range ids {
		s := strconv.FormatInt(id, 10)
		if b.Len() > 0 && b.Len()+1+len(s) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}
