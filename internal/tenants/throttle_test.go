package tenants_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/example/payments/internal/tenants"
)

// client is the /32 of 203.0.113.n, or of 198.51.100.n past 255.
func client(n int) netip.Prefix {
	a := netip.AddrFrom4([4]byte{203, 0, 113, byte(n)})
	if n > 255 {
		a = netip.AddrFrom4([4]byte{198, 51, 100, byte(n - 256)})
	}
	return netip.PrefixFrom(a, 32)
}

// start is when the throttle tests' clocks start.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestThrottle: past Failures in a window a client is blocked until the
// window ends, another client is not; the zero value blocks no one.
func TestThrottle(t *testing.T) {
	t.Parallel()
	now := start // moved by hand; the throttle reads it on the test's goroutine
	th := &tenants.Throttle{Failures: 2, Window: time.Minute, Now: func() time.Time { return now }}
	th.Failed(client(1))
	if blocked, _ := th.Blocked(client(1)); blocked {
		t.Fatal("blocked after one failure of two")
	}
	th.Failed(client(1))
	now = now.Add(20 * time.Second)
	if blocked, left := th.Blocked(client(1)); !blocked || left != 40*time.Second {
		t.Fatalf("after two failures: blocked %v for %s, want true for 40s", blocked, left)
	}
	if blocked, _ := th.Blocked(client(2)); blocked {
		t.Fatal("another client is blocked")
	}
	now = now.Add(40 * time.Second)
	if blocked, _ := th.Blocked(client(1)); blocked {
		t.Fatal("still blocked in the next window")
	}
	for _, off := range []*tenants.Throttle{nil, {}, {Failures: 1}} {
		off.Failed(client(1))
		if blocked, _ := off.Blocked(client(1)); blocked {
			t.Fatalf("%+v blocks", off)
		}
	}
}

// TestThrottleFull: when the table is full, the clients that failed least
// recently are forgotten to make room. A flood of failures from many
// addresses never stops a new address being counted and blocked, and a
// blocked client that keeps trying stays blocked.
func TestThrottleFull(t *testing.T) {
	t.Parallel()
	th := &tenants.Throttle{Failures: 3, Window: time.Hour, Capacity: 100, Now: func() time.Time { return start }}
	// A client that keeps failing, one failure short of the limit.
	persistent := client(0)
	th.Failed(persistent)
	th.Failed(persistent)
	// The flood fills the table five times over; the persistent client
	// fails once more early on, and then keeps trying while blocked.
	for i := 1; i <= 500; i++ {
		th.Failed(client(i))
		switch {
		case i == 50:
			th.Failed(persistent)
		case i%50 == 0:
			if blocked, _ := th.Blocked(persistent); !blocked {
				t.Fatalf("after %d others failed, a client that keeps trying is no longer blocked", i)
			}
		}
	}
	// A new client, after the table filled, is counted and blocked.
	newcomer := netip.MustParsePrefix("192.0.2.7/32")
	for range 3 {
		th.Failed(newcomer)
	}
	if blocked, _ := th.Blocked(newcomer); !blocked {
		t.Fatal("a new client is not counted once the table is full")
	}
	// The oldest of the flood were forgotten: a client that failed at the
	// start, twice, starts again from one.
	th.Failed(client(1))
	th.Failed(client(1))
	if blocked, _ := th.Blocked(client(1)); blocked {
		t.Error("the oldest client was kept, the table beyond its capacity")
	}
}
