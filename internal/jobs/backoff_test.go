package jobs_test

import (
	"math"
	"testing"
	"time"

	"github.com/example/payments/internal/jobs"
)

// TestBackoffLargeBase: a base delay of seconds doubled thirty-odd times
// is more than a time.Duration holds. The delay must still stay within the
// cap (it runs in River's retry policy, where a panic kills the worker), from
// half the base up to Max, and reach at least half of Max once every
// ceiling has.
func TestBackoffLargeBase(t *testing.T) {
	t.Parallel()
	for base := time.Nanosecond; base <= time.Hour; base = base*3 + 1 {
		b := jobs.Backoff{Base: base, Max: time.Hour}
		for attempt := 1; attempt <= 1000; attempt++ {
			low := b.Base / 2
			if attempt > 32 {
				low = b.Max / 2
			}
			if d := b.Delay(attempt); d < low || d > b.Max {
				t.Fatalf("Base %s: Delay(%d) = %s, want within [%s, %s]", base, attempt, d, low, b.Max)
			}
		}
	}
}

// TestBackoffHorizon: the retry horizon grows with the attempts and never
// wraps around to a negative or shorter one; beyond the longest duration it
// stays there. A wrapped horizon would let the worker's configuration check
// pass a OPERATION_DEADLINE far shorter than the retries.
func TestBackoffHorizon(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		b    jobs.Backoff
		// last is the horizon of 1000 attempts of a minute.
		last time.Duration
	}{
		{"LargeBase", jobs.Backoff{Base: 5 * time.Second, Max: time.Hour},
			5*time.Second*(1<<10-1) + (1000-1-10)*time.Hour + 1000*time.Minute},
		{"Saturates", jobs.Backoff{Base: time.Hour, Max: math.MaxInt64}, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prev := tc.b.Horizon(1, time.Minute)
			if prev != time.Minute {
				t.Fatalf("Horizon(1) = %s, want one attempt's timeout", prev)
			}
			for attempts := 2; attempts <= 1000; attempts++ {
				h := tc.b.Horizon(attempts, time.Minute)
				if h < prev {
					t.Fatalf("Horizon(%d) = %s, below Horizon(%d) = %s", attempts, h, attempts-1, prev)
				}
				prev = h
			}
			if prev != tc.last {
				t.Fatalf("Horizon(1000) = %s, want %s", prev, tc.last)
			}
		})
	}
}
