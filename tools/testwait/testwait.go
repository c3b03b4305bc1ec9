// Package testwait waits in tests for a condition, never for wall time.
package testwait

import (
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
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
