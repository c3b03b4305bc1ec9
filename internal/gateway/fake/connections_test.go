package fake_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/example/payments/internal/gateway/fake"
)

// TestConnectionsKept makes calls at once, twice over: the second round
// finds every connection the first opened still open, as a worker's jobs
// do call after call. Go's default transport keeps two a host, so the
// second round dialed all but two anew.
func TestConnectionsKept(t *testing.T) {
	t.Parallel()
	const atOnce = 10
	var (
		dialed  atomic.Int64
		mu      sync.Mutex
		arrived int
		release = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each round's calls are all in flight before any is answered, so
		// that each needs a connection of its own.
		mu.Lock()
		arrived++
		if arrived == atOnce {
			arrived = 0
			close(release)
		}
		wait := release
		mu.Unlock()
		select {
		case <-wait:
		case <-time.After(10 * time.Second):
			t.Error("the calls were not all in flight at once")
		}
		_, _ = w.Write([]byte(`{"id": "ch_1", "status": "succeeded"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		name   string
		client *fake.Client
	}{
		{"new", fake.New(srv.URL, 5*time.Second)},
		{"traced", fake.New(srv.URL, 5*time.Second).Traced(noop.NewTracerProvider())},
	} {
		before := dialed.Load()
		for round := range 2 {
			mu.Lock()
			release = make(chan struct{})
			mu.Unlock()
			var wg sync.WaitGroup
			for range atOnce {
				wg.Go(func() {
					if _, err := tc.client.GetCharge(context.Background(), "ch_1"); err != nil {
						t.Errorf("%s, round %d: %v", tc.name, round, err)
					}
				})
			}
			wg.Wait()
		}
		if got := dialed.Load() - before; got != atOnce {
			t.Errorf("%s: %d connections dialed for two rounds of %d calls at once, want %d", tc.name, got, atOnce, atOnce)
		}
	}
}
