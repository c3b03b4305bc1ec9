package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
func (l *Listener) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		l.logger.Warn("listener lost its connection", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (l *Listener) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+finishedChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Notifications sent while disconnected are lost: have every waiter look.
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for field := range strings.SplitSeq(n.Payload, ",") {
			if id, err := strconv.ParseInt(field, 10, 64); err == nil {
				l.wake(id)
			}
		}
	}
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
