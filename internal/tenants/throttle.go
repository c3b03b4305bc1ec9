package tenants

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// MaxThrottled is how many clients a Throttle counts at once, unless its
// Capacity says otherwise: it bounds the memory a flood of failures from
// many addresses can take.
const MaxThrottled = 100_000

// Throttle counts failed authentications per client (an address, or the
// prefix a client holds) in fixed windows: past Failures in one Window, the
// client is blocked until the window ends. The zero value, and a nil
// Throttle, block no one.
//
// When Capacity clients are counted, the client seen least recently (its
// last failure, or its last try while blocked) is forgotten to make room: a
// flood from many addresses costs the oldest counts, and never stops a new
// client's failures being counted. Were new clients no longer counted once
// the table is full, a flood of failures from enough addresses would let
// any other address guess keys unthrottled for the rest of the window.
type Throttle struct {
	Failures int
	Window   time.Duration
	// Capacity bounds the clients counted; 0 means MaxThrottled.
	Capacity int
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	start time.Time
	// counts holds an element of order for each client counted; order runs
	// from the client seen most recently to the one seen least recently,
	// which is forgotten first.
	counts map[netip.Prefix]*list.Element
	order  list.List
}

// failuresOf is a client's count in the current window.
type failuresOf struct {
	client netip.Prefix
	n      int
}

// on reports whether t throttles at all.
func (t *Throttle) on() bool { return t != nil && t.Failures > 0 && t.Window > 0 }

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// roll starts a new window when the current one is over; t.mu is held.
func (t *Throttle) roll(now time.Time) {
	if t.counts == nil || now.Sub(t.start) >= t.Window {
		t.start, t.counts = now, map[netip.Prefix]*list.Element{}
		t.order.Init()
	}
}

// Blocked reports whether client has failed Failures times in this window,
// and if so for how long it stays blocked.
func (t *Throttle) Blocked(client netip.Prefix) (bool, time.Duration) {
	if !t.on() {
		return false, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.roll(now)
	e, ok := t.counts[client]
	if !ok || e.Value.(*failuresOf).n < t.Failures {
		return false, 0
	}
	// A client that keeps trying while blocked is as recent as one that
	// fails: a flood from other addresses does not unblock it.
	t.order.MoveToFront(e)
	return true, t.Window - now.Sub(t.start)
}

// Failed counts one failed authentication of client, forgetting the client
// seen least recently if the table is full.
func (t *Throttle) Failed(client netip.Prefix) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.roll(t.now())
	if e, ok := t.counts[client]; ok {
		e.Value.(*failuresOf).n++
		t.order.MoveToFront(e)
		return
	}
	capacity := t.Capacity
	if capacity <= 0 {
		capacity = MaxThrottled
	}
	for len(t.counts) >= capacity {
		oldest := t.order.Back()
		delete(t.counts, t.order.Remove(oldest).(*failuresOf).client)
	}
	t.counts[client] = t.order.PushFront(&failuresOf{client: client, n: 1})
}
