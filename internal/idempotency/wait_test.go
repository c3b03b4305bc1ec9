package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/tools/testwait"
)

// announced gives s a running Listener and an Announcer with cooldown, and
// polls only every hour, so that a waiter can be woken only by an
// announcement. Both stop when the test ends, with the context returned.
func announced(t *testing.T, s *idempotency.Store, cooldown time.Duration) (context.Context, *idempotency.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	listener := idempotency.NewListener(s.DB, logger)
	s.Announcer = idempotency.NewAnnouncer(s.DB, cooldown, logger)
	var wg sync.WaitGroup
	wg.Go(func() { listener.Run(ctx) })
	wg.Go(func() { s.Announcer.Run(ctx) })
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	s.Notifications = listener
	s.PollInterval = time.Hour
	return ctx, listener
}

// TestWaitIsWokenByNotify proves that a finish wakes a waiter through
// LISTEN/NOTIFY: polling is set to an hour, so only the notification can.
func TestWaitIsWokenByNotify(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, listener := announced(t, s, time.Millisecond)

	lease := started(t, s)
	waiting := make(chan idempotency.Key)
	go func() {
		key, err := s.Wait(ctx, lease, time.Minute)
		if err != nil {
			t.Error(err)
		}
		waiting <- key
	}()
	// Finish only once the waiter is subscribed, so it is the notification
	// (or the re-check after LISTEN connects) that must wake it.
	testwait.Within(t, 10*time.Second, "the waiter to subscribe", func() bool { return listener.Waiting(lease.Key.ID) > 0 })
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	awaitWoken(t, waiting, "the notification")
}

// awaitWoken waits for a waiter to send its key on woken, finished, for 30
// seconds at the most; by is what should have woken it.
func awaitWoken(t *testing.T, woken <-chan idempotency.Key, by string) {
	t.Helper()
	select {
	case key := <-woken:
		if !key.Finished() {
			t.Fatalf("woken with an unfinished key: %+v", key)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a waiter was not woken by %s", by)
	}
}

// TestWaitLooksFirstButForANewKey: a request that created its key a moment
// ago does not read it before waiting; should it finish before the waiter
// subscribes, the poll finds it. A retry reads its key first.
func TestWaitLooksFirstButForANewKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.PollInterval = time.Hour
	ctx := context.Background()
	lease := started(t, s)
	if !lease.Created {
		t.Fatalf("started = %+v, want a created lease", lease)
	}
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	retry := lease
	retry.Created = false
	if key, err := s.Wait(ctx, retry, time.Minute); err != nil || !key.Finished() {
		t.Fatalf("a retry's wait = %+v, %v; want the finished key at once", key, err)
	}
	// Without notifications, the new key's first look is the poll's, and
	// with an hour's poll the timeout's.
	start := time.Now()
	if key, err := s.Wait(ctx, lease, 200*time.Millisecond); err != nil || !key.Finished() || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("the creator's wait = %+v, %v after %s; want the finished key at the timeout", key, err, time.Since(start))
	}
	s.PollInterval = 20 * time.Millisecond
	if key, err := s.Wait(ctx, lease, time.Minute); err != nil || !key.Finished() {
		t.Fatalf("the creator's wait with a poll = %+v, %v", key, err)
	}
}

// TestAnnouncerWakesEveryWaiter: keys finished together are announced in
// one notification or few, and every waiter is woken by it.
func TestAnnouncerWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// A long cooldown: after the first send, the rest must share one.
	ctx, listener := announced(t, s, 200*time.Millisecond)

	const n = 20
	woken := make(chan idempotency.Key, n)
	var ids []int64
	for i := range n {
		lease, err := start(ctx, s, request(t, fmt.Sprintf("k%d", i), "/v1/things", `{}`), fmt.Sprintf("thing_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, lease.Key.ID)
		go func() {
			key, err := s.Wait(ctx, lease, time.Minute)
			if err != nil {
				t.Error(err)
			}
			woken <- key
		}()
	}
	for _, id := range ids {
		testwait.Within(t, 10*time.Second, "the waiter to subscribe", func() bool { return listener.Waiting(id) > 0 })
	}
	for _, id := range ids {
		finish(t, s, id, idempotency.RecoveryStarted)
	}
	for range n {
		awaitWoken(t, woken, "the announcement")
	}
}
