package idempotency

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
)

// finishedChannel is the NOTIFY channel on which finished keys' ids are
// sent, separated by commas (see Announcer).
const finishedChannel = "idempotency_key_finished"

// Listener holds one connection that LISTENs for finished keys and wakes the
// requests waiting on them, so waiting costs no polling.
type Listener struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu      sync.Mutex
	waiters map[int64]map[chan struct{}]struct{}
}

// NewListener returns a Listener that connects with pool's configuration.
func NewListener(pool *pgxpool.Pool, logger *slog.Logger) *Listener {
	return &Listener{pool: pool, logger: logger, waiters: make(map[int64]map[chan struct{}]struct{})}
}

// Run listens until ctx ends, reconnecting after a lost connection.
// Notifications sent while disconnected are lost: each connection has every
// waiter look.
func (l *Listener) Run(ctx context.Context) {
	Announcements(ctx, l.pool, l.logger, l.wakeAll, l.wake)
}

// Announcements calls heard with the id of each key the Announcers announce
// finished, until ctx ends, on a connection of its own, as database.Listen
// does (connected is called each time it has connected). The Listener wakes
// its waiters by it; a measurement tool may time the announcements by it.
func Announcements(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, connected func(), heard func(id int64)) {
	database.Listen(ctx, pool, finishedChannel, logger, connected, func(payload string) {
		for field := range strings.SplitSeq(payload, ",") {
			if id, err := strconv.ParseInt(field, 10, 64); err == nil {
				heard(id)
			}
		}
	})
}

// subscribe returns a channel that receives when key id may have finished.
func (l *Listener) subscribe(id int64) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters[id] == nil {
		l.waiters[id] = make(map[chan struct{}]struct{})
	}
	l.waiters[id][ch] = struct{}{}
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.waiters[id], ch)
		if len(l.waiters[id]) == 0 {
			delete(l.waiters, id)
		}
	}
}

func (l *Listener) wake(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.waiters[id] {
		signal(ch)
	}
}

func (l *Listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.waiters {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
