package client

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name          string
		base, maxWait time.Duration
		retry         int
		want          time.Duration // the ceiling jitter draws below
	}{
		{name: "First", base: 200 * time.Millisecond, maxWait: 5 * time.Second, retry: 1, want: 200 * time.Millisecond},
		{name: "Second", base: 200 * time.Millisecond, maxWait: 5 * time.Second, retry: 2, want: 400 * time.Millisecond},
		{name: "Fifth", base: 200 * time.Millisecond, maxWait: 5 * time.Second, retry: 5, want: 3200 * time.Millisecond},
		{name: "Capped", base: 200 * time.Millisecond, maxWait: 5 * time.Second, retry: 6, want: 5 * time.Second},
		{name: "ManyRetries", base: 200 * time.Millisecond, maxWait: 5 * time.Second, retry: 1000, want: 5 * time.Second},
		{name: "NoOverflow", base: time.Second, maxWait: math.MaxInt64, retry: 200, want: math.MaxInt64},
		{name: "MaxBelowBase", base: time.Second, maxWait: 100 * time.Millisecond, retry: 1, want: 100 * time.Millisecond},
		{name: "Zero", base: 0, maxWait: 0, retry: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := New("http://x", "sk", WithBackoff(tt.base, tt.maxWait))
			c.jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			if got := c.backoff(tt.retry); got != tt.want {
				t.Errorf("backoff(%d) ceiling = %v, want %v", tt.retry, got, tt.want)
			}
		})
	}

	t.Run("FullJitter", func(t *testing.T) {
		t.Parallel()
		c := New("http://x", "sk")
		seen := map[bool]bool{}
		for range 1000 {
			d := c.backoff(3)
			if d < 0 || d >= 800*time.Millisecond {
				t.Fatalf("backoff(3) = %v, want within [0, 800ms)", d)
			}
			seen[d < 400*time.Millisecond] = true
		}
		if len(seen) != 2 {
			t.Error("1000 draws all fell in one half of the range; want jitter across it")
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{name: "Seconds", value: "3", want: 3 * time.Second, wantOK: true},
		{name: "Zero", value: "0", want: 0, wantOK: true},
		{name: "Spaces", value: " 2 ", want: 2 * time.Second, wantOK: true},
		{name: "PastDate", value: "Wed, 21 Oct 2015 07:28:00 GMT", want: 0, wantOK: true},
		{name: "Missing", value: ""},
		{name: "Negative", value: "-1"},
		{name: "Garbage", value: "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseRetryAfter(tt.value)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}

	t.Run("FutureDate", func(t *testing.T) {
		t.Parallel()
		v := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
		got, ok := parseRetryAfter(v)
		if !ok || got <= 58*time.Minute || got > time.Hour {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want about an hour", v, got, ok)
		}
	})
}

func TestSleepCtx(t *testing.T) {
	t.Parallel()

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// An hour-long wait on a cancelled context returns at once, or
		// the test times out.
		if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("sleepCtx = %v, want context.Canceled", err)
		}
	})

	t.Run("Zero", func(t *testing.T) {
		t.Parallel()
		if err := sleepCtx(context.Background(), 0); err != nil {
			t.Errorf("sleepCtx(0) = %v, want nil", err)
		}
	})

	t.Run("Elapses", func(t *testing.T) {
		t.Parallel()
		if err := sleepCtx(context.Background(), time.Millisecond); err != nil {
			t.Errorf("sleepCtx(1ms) = %v, want nil", err)
		}
	})
}

func TestNewIdempotencyKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k := NewIdempotencyKey()
		if _, err := hex.DecodeString(k); err != nil || len(k) != 32 {
			t.Fatalf("key %q, want 32 hex characters", k)
		}
		if seen[k] {
			t.Fatalf("key %q generated twice", k)
		}
		seen[k] = true
	}
}
