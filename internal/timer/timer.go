// Package timer runs work on time: every interval, at most once a cooldown, or after a wait, until a context ends.
package timer

import (
	"context"
	"time"
)

// Throttle calls send each time poke receives, but at most once per
// cooldown, until ctx ends: what arrives during a cooldown is sent by the
// next call, together. The waker of River's workers and the announcer of
// finished keys send their notifications this way, so that a burst of
// commits costs one notifying commit.
func Throttle(ctx context.Context, poke <-chan struct{}, cooldown time.Duration, send func(context.Context)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poke:
		}
		send(ctx)
		timer.Reset(cooldown)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// Every calls do every interval, the first time one interval from now,
// until ctx ends: a presence's checks and the queue tables' vacuum run this
// way.
func Every(ctx context.Context, interval time.Duration, do func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		do()
	}
}

// Sleep waits for d, or until ctx ends, and returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
