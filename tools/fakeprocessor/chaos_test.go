package fakeprocessor_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testwait"
)

func TestTimeoutToken(t *testing.T) {
	t.Parallel()
	const body = `{"amount":900,"currency":"USD","payment_method":"pm_card_timeout"}`

	t.Run("CallerGivesUp", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{TimeoutHang: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		e.postUnanswered(ctx, "/v1/charges", "timeout", body)
		// The charge commits whether or not the caller is still there.
		testwait.For(t, "the charge", func() bool { return e.chargesUnder("timeout") == 1 })

		retry := e.post("/v1/charges", "timeout", body)
		wantReplayed(t, retry)
		if c := decode[fakeprocessor.Charge](t, retry); c.Status != "succeeded" || c.IdempotencyKey != "timeout" {
			t.Errorf("charge = %s", retry.body)
		}
		e.wantChargesUnder(t, "timeout", 1)
	})
	t.Run("HangLimit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{TimeoutHang: 50 * time.Millisecond})
		start := time.Now()
		e.postOK(t, "/v1/charges", "hang-limit", body)
		if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
			t.Errorf("answered after %v, before the hang limit", elapsed)
		}
	})
	t.Run("ReleasedByClose", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{TimeoutHang: time.Hour})
		answered := e.postAsync("/v1/charges", "released", body)
		testwait.For(t, "the charge", func() bool { return e.chargesUnder("released") == 1 })
		e.proc.Close()
		if resp := <-answered; resp.status != http.StatusOK {
			t.Errorf("status = %d: %s", resp.status, resp.body)
		}
	})
}

func TestChaos(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		chaos      fakeprocessor.Chaos
		wantStatus int // 0: the connection is dropped
		wantCharge bool
	}{
		{"FailAlways", fakeprocessor.Chaos{FailRate: 1}, http.StatusInternalServerError, false},
		{"FailDrawn", fakeprocessor.Chaos{FailRate: 0.5, Rand: func() float64 { return 0.49 }}, http.StatusInternalServerError, false},
		{"FailNotDrawn", fakeprocessor.Chaos{FailRate: 0.5, Rand: func() float64 { return 0.5 }}, http.StatusOK, true},
		{"DropAlways", fakeprocessor.Chaos{DropRate: 1}, 0, true},
		{"DropNotDrawn", fakeprocessor.Chaos{DropRate: 0.1, Rand: func() float64 { return 0.2 }}, http.StatusOK, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakeprocessor.Config{Chaos: tt.chaos})
			resp, err := e.postCtx(context.Background(), "/v1/charges", "chaos", visaBody)
			switch {
			case tt.wantStatus == 0 && err == nil:
				t.Fatalf("got an answer, want a dropped connection: %d %s", resp.status, resp.body)
			case tt.wantStatus != 0 && err != nil:
				t.Fatalf("post: %v", err)
			case resp.status != tt.wantStatus:
				t.Fatalf("status = %d, want %d: %s", resp.status, tt.wantStatus, resp.body)
			}
			want := 0
			if tt.wantCharge {
				want = 1
			}
			e.wantChargesUnder(t, "chaos", want)
			if n := e.keyRows("chaos"); n != want {
				t.Errorf("key rows = %d, want %d", n, want)
			}
		})
	}
}

func TestChaosDropThenRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{DropRate: 1}})
	e.postUnanswered(context.Background(), "/v1/charges", "dropped", visaBody)
	// Only fresh results are dropped, so the retry replays the charge.
	retry := e.post("/v1/charges", "dropped", visaBody)
	wantReplayed(t, retry)
	got := e.get("/v1/charges/" + decode[fakeprocessor.Charge](t, retry).ID)
	if !bytes.Equal(got.body, retry.body) {
		t.Errorf("GET = %s, replay = %s", got.body, retry.body)
	}
}

func TestChaosLatency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{Latency: 100 * time.Millisecond}})
	start := time.Now()
	resp := e.get("/v1/charges?idempotency_key=none")
	if resp.status != http.StatusOK {
		t.Fatalf("status = %d: %s", resp.status, resp.body)
	}
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Errorf("answered after %v, want at least the latency", elapsed)
	}
}

// TestChaosExecLatency checks that the execution time is spent whether or
// not the caller is still there: the charge commits after its caller left.
func TestChaosExecLatency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{ExecLatency: 500 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	e.postUnanswered(ctx, "/v1/charges", "exec-latency", visaBody)
	testwait.For(t, "the charge", func() bool { return e.chargesUnder("exec-latency") == 1 })
	wantReplayed(t, e.post("/v1/charges", "exec-latency", visaBody))
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	wantRefused(t, []badConfig{
		{"ErrFailRate", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{FailRate: 1.5}}},
		{"ErrDropRate", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{DropRate: -0.1}}},
		{"ErrLatency", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{Latency: -time.Second}}},
		{"ErrExecLatency", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{ExecLatency: -time.Second}}},
		{"ErrExecLatencyTooLong", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{ExecLatency: 30 * time.Second}}},
		{"ErrTimeoutHang", fakeprocessor.Config{TimeoutHang: -time.Second}},
		{"ErrKeyRetention", fakeprocessor.Config{KeyRetention: -time.Second}},
	})
}
