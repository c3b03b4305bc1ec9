package jobs

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// Backoff is the retry policy of failed jobs: exponential from Base, capped
// at Max, with equal jitter so that retries after an outage spread out.
type Backoff struct {
	Base, Max time.Duration
}

// NextRetry implements river.ClientRetryPolicy.
func (b Backoff) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(b.Delay(job.Attempt))
}

// Delay is the wait after the attempt-th failed attempt: the ceiling with
// up to half of it taken off at random.
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.ceiling(attempt)
	return d/2 + rand.N(d/2+1)
}

// Horizon is the longest time a job can spend between its first attempt and
// its last: every delay at its ceiling, plus every attempt at its timeout.
// A horizon longer than a time.Duration holds is the longest one, so that a
// check against it never passes by overflow.
func (b Backoff) Horizon(attempts int, jobTimeout time.Duration) time.Duration {
	var total time.Duration
	for a := 1; a <= attempts && total < math.MaxInt64; a++ {
		total = addCapped(total, jobTimeout)
		if a < attempts {
			total = addCapped(total, b.ceiling(a))
		}
	}
	return total
}

// ceiling is Base doubled for each attempt after the first, capped at Max.
// Base is compared with Max halved as often, because Base doubled that often
// can overflow.
func (b Backoff) ceiling(attempt int) time.Duration {
	shift := max(attempt-1, 0)
	if shift >= 32 || b.Base > b.Max>>shift {
		return b.Max
	}
	return b.Base << shift
}

// addCapped is x+y for durations that are not negative, or the longest
// duration where the sum would overflow.
func addCapped(x, y time.Duration) time.Duration {
	if y > math.MaxInt64-x {
		return math.MaxInt64
	}
	return x + y
}
