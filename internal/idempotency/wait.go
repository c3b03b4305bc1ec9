package idempotency

import (
	"context"
	"time"
)

// Wait returns lease's key once it is finished, or as it stands when timeout
// passes first. A notification from the Listener wakes it at once; polling
// every PollInterval covers notifications lost with a connection. The key is
// read once subscribed, unless this request created it a moment ago (its
// operation's job has yet to be picked up): should it finish before the
// subscription, the poll reads it.
func (s *Store) Wait(ctx context.Context, lease Lease, timeout time.Duration) (Key, error) {
	keyID, look := lease.Key.ID, !lease.Created
	var wake <-chan struct{}
	if s.Notifications != nil {
		ch, unsubscribe := s.Notifications.subscribe(keyID)
		defer unsubscribe()
		wake = ch
	}
	poll := s.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()

	for {
		// Subscribed before looking, so a finish between the two is not missed.
		if look {
			key, err := s.GetByID(ctx, s.reads(), keyID)
			if err != nil || key.Finished() {
				return key, err
			}
		}
		look = true
		select {
		case <-wake:
		case <-ticker.C:
		case <-deadline.C:
			return s.GetByID(ctx, s.reads(), keyID)
		case <-ctx.Done():
			return Key{}, ctx.Err()
		}
	}
}
