package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// arrivals is a processor that answers every request 200 at once and keeps
// the time each arrived.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time
	srv   *httptest.Server
}

func newArrivals(t *testing.T) *arrivals {
	a := &arrivals{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// busiestSecond is the most requests that arrived within any one second.
func (a *arrivals) busiestSecond() int {
	a.mu.Lock()
	times := append([]time.Time(nil), a.times...)
	a.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	most := 0
	for i, j := 0, 0; i < len(times); i++ {
		for j < len(times) && times[j].Sub(times[i]) < time.Second {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.times)
}

// send makes one request through rt, marked as sh's.
func send(ctx context.Context, rt http.RoundTripper, url string, sh operation.Share) error {
	req, err := http.NewRequestWithContext(operation.WithShare(ctx, sh), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// TestPaceAcrossWorkers: two workers, each with a pool of its own, pace
// their requests to one processor in the database they share: flat out from
// both, the processor sees at most the rate (and the one turn a second's
// edges can add) in any second, and close to the rate on average.
func TestPaceAcrossWorkers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	proc := newArrivals(t)
	const rate, run = 50.0, 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		pool, err := database.Connect(context.Background(), db.URL, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		rt := gateway.Paced(http.DefaultTransport, &gateway.Pace{DB: pool, Processor: "fake", Rate: rate})
		for range 20 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_ = send(ctx, rt, proc.srv.URL, operation.ShareCall)
				}
			})
		}
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	t.Logf("at %g a second from two workers: %d in the busiest second, %.1f a second on average", rate, proc.busiestSecond(), float64(proc.count())/took)
	if most := proc.busiestSecond(); most > rate*1.1 {
		t.Errorf("%d requests within one second at %g a second", most, rate)
	}
	if avg := float64(proc.count()) / took; avg < rate*0.9 {
		t.Errorf("%.1f requests a second on average at %g a second, from two workers flat out", avg, rate)
	}
}

// TestPaceShares: behind a backlog of calls, a lookup, a ledger page and a
// call that could not wait long enough get no turn and are not sent
// (operation.ErrNotSent, with the wait to try again after); once the calls
// are quiet, the lookups have the whole pace.
func TestPaceShares(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	proc := newArrivals(t)
	rt := gateway.Paced(http.DefaultTransport, &gateway.Pace{DB: db.Pool, Processor: "fake", Rate: 10})
	// 30 calls at 10 a second: their turns reach three seconds out.
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if err := send(context.Background(), rt, proc.srv.URL, operation.ShareCall); err != nil {
				t.Errorf("a call with no deadline: %v", err)
			}
		})
	}
	testwait.For(t, "the calls to start", func() bool { return proc.count() >= 3 })
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for name, try := range map[string]func() error{
		"a lookup":                  func() error { return send(context.Background(), rt, proc.srv.URL, operation.ShareLookup) },
		"a ledger page":             func() error { return send(context.Background(), rt, proc.srv.URL, operation.ShareLedger) },
		"a call with a second left": func() error { return send(short, rt, proc.srv.URL, operation.ShareCall) },
	} {
		err := try()
		if wait, notSent := operation.RetryAfter(err); !notSent || wait <= 0 {
			t.Errorf("%s behind three seconds of calls: %v, want not sent with a wait", name, err)
		}
		if !errors.Is(err, operation.ErrProcessorUnknown) {
			t.Errorf("%s not sent: %v does not wrap ErrProcessorUnknown", name, err)
		}
	}
	wg.Wait()
	if n := proc.count(); n != 30 {
		t.Errorf("the processor saw %d requests, want the 30 calls only", n)
	}
	start := time.Now()
	for range 10 {
		if err := send(context.Background(), rt, proc.srv.URL, operation.ShareLookup); err != nil {
			t.Fatalf("a lookup with the calls quiet: %v", err)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("10 lookups took %s with the calls quiet, at 10 a second", took)
	}
}
