// Package testwait waits in tests for a condition, never for wall time.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// For polls cond every few milliseconds until it holds, and fails t when it
// does not within 20 seconds.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, 20*time.Second, what, cond)
}

// Within is For with a deadline of d, for what takes a maintenance cycle.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Poll(t, time.Now().Add(d), 10*time.Millisecond, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("timed out waiting for %s", what)
	})
}

// Poll calls check every interval until it returns nil, and fails t with
// check's last error when it has not by the deadline. A check that costs the
// program under test a request wants an interval longer than For's.
func Poll(t testing.TB, deadline time.Time, interval time.Duration, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(interval)
	}
}
