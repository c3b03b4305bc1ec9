package webhooks

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// DefaultSchedule is the wait before each retry, after a first attempt made
// at once: Standard Webhooks' schedule, about three days in all.
var DefaultSchedule = Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Schedule is the wait before each retry of a delivery, read from the
// environment as comma-separated durations.
type Schedule []time.Duration

// Decode lets envconfig read a Schedule: 1 to 20 positive durations.
func (s *Schedule) Decode(value string) error {
	var out Schedule
	for _, part := range strings.Split(value, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 20 {
		return errors.New("must list 1 to 20 durations")
	}
	*s = out
	return nil
}

// retry is a failed attempt's outcome: another attempt after the schedule's
// wait (or the receiver's Retry-After, when it gave one), or the delivery
// failed when a was its chain's last.
func (d *Deliverer) retry(a attempt, out outcome, retryAfter time.Duration) outcome {
	if a.number > len(d.Schedule) {
		out.result = ResultFailed
		return out
	}
	out.result, out.wait = ResultRetrying, jitter(d.Schedule[a.number-1])
	if retryAfter > 0 {
		out.wait = min(retryAfter, 24*time.Hour)
	}
	return out
}

// jitter spreads d by up to a tenth either way, so that deliveries that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}
