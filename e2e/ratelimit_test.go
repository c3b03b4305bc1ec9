package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
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
