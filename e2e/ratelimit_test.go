package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestTenantLimitAcrossReplicas: one tenant's requests spread over three
// API processes are held to TENANT_RATE_LIMIT in all, within 15%, not three
// times it: the replicas count in the database they share.
func TestTenantLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	const (
		limit  = 40
		window = time.Second
		run    = 5500 * time.Millisecond
	)
	env := []string{fmt.Sprintf("TENANT_RATE_LIMIT=%d", limit), "TENANT_RATE_WINDOW=" + window.String()}
	s := startStack(t, testdb.New(t).URL, env, nil)
	urls := []string{s.apiURL}
	for range 2 {
		addr := freeAddr(t)
		s.startAPIAt(addr, env...)
		urls = append(urls, "http://"+addr)
	}

	var admitted, limited, n atomic.Int64
	var wg sync.WaitGroup
	started := time.Now()
	for c := range 9 {
		wg.Go(func() {
			for time.Since(started) < run {
				i := n.Add(1)
				status, header, body := do(t, http.MethodPost, urls[c%len(urls)]+"/v1/payments", "sk_test_acme", fmt.Sprintf("k-%d", i),
					crashBody, "Prefer", "respond-async")
				switch {
				case status == http.StatusAccepted:
					admitted.Add(1)
				case status == http.StatusTooManyRequests && header.Get("Retry-After") != "":
					limited.Add(1)
				default:
					t.Errorf("request %d: %d %v %s", i, status, header, body)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(started)
	want := float64(limit) * elapsed.Seconds() / window.Seconds()
	ratio := float64(admitted.Load()) / want
	t.Logf("%d admitted, %d limited in %s over 3 APIs: %.2f of the limit", admitted.Load(), limited.Load(), elapsed.Round(time.Millisecond), ratio)
	if limited.Load() == 0 || ratio < 0.85 || ratio > 1.15 {
		t.Fatalf("%d admitted in %s, %.2f of %d per %s (want within 15%%), %d limited", admitted.Load(), elapsed, ratio, limit, window, limited.Load())
	}
}

// TestProcessorRateLimitAcrossWorkers: two worker processes under a backlog
// of payments keep PROCESSOR_RATE_LIMIT in all, not twice it: the processor
// saw at most the limit and a tenth in any four seconds, counted by the
// creation times of its charges, and at least nine tenths of it on average,
// every payment charged once.
func TestProcessorRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	const limit, payments = 50, 400
	env := []string{fmt.Sprintf("PROCESSOR_RATE_LIMIT=%d", limit)}
	db := testdb.New(t)
	s := startStack(t, db.URL, []string{"TENANT_RATE_LIMIT=0"}, env)
	s.anotherWorker(env...)
	var wg sync.WaitGroup
	var n atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := n.Add(1); i <= payments; i = n.Add(1) {
				s.payAsync(t, fmt.Sprintf("paced-%d", i))
			}
		})
	}
	wg.Wait()
	testwait.Within(t, 2*time.Minute, "every payment to settle", func() bool {
		return db.Count(t, `SELECT count(*) FROM payments WHERE status = 'processing'`) == 0
	})
	if charged := db.Count(t, `SELECT count(*) FROM processor.charges`); charged != payments {
		t.Fatalf("%d payments charged, want %d", charged, payments)
	}
	var times []time.Time
	rows, err := db.Pool.Query(t.Context(), `SELECT created_at FROM processor.charges ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		times = append(times, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// busiest is the most charges whose times fall within w of each other.
	busiest := func(w time.Duration) int {
		most := 0
		for i, j := 0, 0; i < len(times); i++ {
			for j < len(times) && times[j].Sub(times[i]) < w {
				j++
			}
			most = max(most, j-i)
		}
		return most
	}
	second, fourSeconds := busiest(time.Second), busiest(4*time.Second)
	span := times[len(times)-1].Sub(times[0]).Seconds()
	avg := float64(len(times)-1) / span
	t.Logf("two workers at PROCESSOR_RATE_LIMIT=%d: %d charges, %d in the busiest second and %d in the busiest four, %.1f a second on average over %.1f s",
		limit, len(times), second, fourSeconds, avg, span)
	// A charge's time is the stand-in's, stamped once the request has
	// crossed the network and waited for its transaction: on a loaded
	// machine that jitter bunches turns taken a little apart, by a few
	// hundred milliseconds' worth at most, which weighs on one second and
	// little on four. Two workers pacing apart would send twice the limit
	// over both.
	if second > limit*3/2 || fourSeconds > 4*limit*11/10 || avg < limit*0.9 {
		t.Errorf("%d charges in the busiest second, %d in the busiest four and %.1f a second on average: want at most %d, at most %d and at least %d",
			second, fourSeconds, avg, limit*3/2, 4*limit*11/10, limit*9/10)
	}
}
