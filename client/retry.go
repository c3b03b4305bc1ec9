package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// NewIdempotencyKey returns a fresh random key of 32 hex characters. A caller
// that stores the key with its own record before calling CreatePayment can
// safely call again with it even after a crash.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	// crypto/rand.Read never fails: it crashes the program rather than
	// return weak randomness.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// backoff returns the wait before retry n (1 for the first retry): a random
// duration from zero up to min(backoffMax, backoffBase·2ⁿ⁻¹), "full jitter",
// so that many clients failing together do not retry together.
func (c *Client) backoff(n int) time.Duration {
	ceiling := c.backoffBase
	for i := 1; i < n; i++ {
		if ceiling >= c.backoffMax/2 {
			// Doubling again reaches the cap (and could overflow).
			ceiling = c.backoffMax
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, c.backoffMax)
	if ceiling <= 0 {
		return 0
	}
	return c.jitter(ceiling)
}

// parseRetryAfter reads a Retry-After header, in seconds or as an HTTP date,
// and reports whether there was a usable one.
func parseRetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

// sleepCtx waits for d, or returns ctx's error as soon as ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
