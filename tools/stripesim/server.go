package stripesim

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the Options left zero.
const (
	defaultProcessingFor    = 3 * time.Second
	defaultRefundPendingFor = 2 * time.Second
	defaultKeyRetention     = 24 * time.Hour
	defaultLatency          = time.Second
	// tick is how often the state is settled while the clock follows real
	// time, so that webhooks of delayed changes are sent unasked.
	tick = 100 * time.Millisecond
)

// Options configure a Server. The zero value is a simulator whose clock
// follows real time from now, that fails nothing, limits nothing and sends
// no webhooks.
type Options struct {
	// Start is the simulator clock's time when New returns; zero means
	// time.Now().
	Start time.Time
	// ManualClock keeps the clock still but for Advance.
	ManualClock bool

	// ProcessingFor is how long a PaymentIntent confirmed with
	// pm_card_processing stays processing before it succeeds; zero means 3s.
	ProcessingFor time.Duration
	// RefundPendingFor is how long a refund stays pending before it
	// settles, and how long after succeeding a refund of pm_card_refundFail
	// fails; zero means 2s.
	RefundPendingFor time.Duration
	// RefundFails is asked as a pending refund settles: a failure reason
	// (Stripe's: declined, expired_or_canceled_card, lost_or_stolen_card,
	// unknown…) fails it, "" lets it succeed. Nil means every refund
	// succeeds. It is called with the Server's state locked, and must not
	// call the Server.
	RefundFails func(Refund) string
	// SearchLag is how long after its creation a PaymentIntent is found by
	// a search. Nil means a lag drawn uniformly from 2s to 5s. It is called
	// with the Server's state locked, and must not call the Server.
	SearchLag func(PaymentIntent) time.Duration
	// SearchUnavailable answers every search 400, as Stripe answers an
	// account in a country without search (India).
	SearchUnavailable bool
	// KeyRetention is how long an idempotency key and its answer are kept
	// after its first use; zero means 24h.
	KeyRetention time.Duration

	// Fault chooses each authenticated request's fault. It is called from
	// the requests' goroutines at once, and must be safe for that. Nil
	// means FaultRates choose.
	Fault func(Request) Fault
	// FaultRates are the probabilities of each fault per request when Fault
	// is nil, each from 0 to 1, together at most 1.
	FaultRates map[Fault]float64
	// Seed seeds every random choice: the faults FaultRates choose, ids,
	// search lags, webhook drops, duplicates and delays.
	Seed int64
	// Latency is what FaultLatency adds, in real time, while the request
	// holds its key; zero means 1s.
	Latency time.Duration
	// RateLimit is how many requests a second (of the simulator clock) are
	// answered, a token bucket with that burst; more are answered 429. Zero
	// means no limit.
	RateLimit float64

	// WebhookURL is where events are posted; "" sends none.
	WebhookURL string
	// WebhookSecret signs them: a whsec_… string, used whole as the HMAC
	// key, as Stripe does. Required with WebhookURL.
	WebhookSecret string
	// WebhookDrop is the probability that an event is never sent.
	WebhookDrop float64
	// WebhookDuplicate is the probability that an event is sent twice.
	WebhookDuplicate float64
	// WebhookDelay is the longest random delay, in real time, before each
	// sending of an event.
	WebhookDelay time.Duration
}

// Stats count what a Server was asked and answered.
type Stats struct {
	// Requests is every request received.
	Requests int
	// ByStatus counts the answers written, by HTTP status.
	ByStatus map[int]int
	// Replayed counts the answers that replayed a saved one.
	Replayed int
	// Lost counts the requests whose connection was closed unanswered
	// (FaultLoseAnswer).
	Lost int
	// MaxPerSecond is the most requests received in any one second of the
	// simulator clock.
	MaxPerSecond int
	// WebhooksSent counts deliveries answered 2xx, WebhooksDropped the
	// events never sent (WebhookDrop), WebhooksFailed the deliveries given
	// up after every retry.
	WebhooksSent, WebhooksDropped, WebhooksFailed int
}

// Server is the simulator: an http.Handler serving Stripe's v1 API, and
// its state. It is safe for concurrent use.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	clock clock
	hc    *http.Client

	// ctx ends with Close, and wg waits for the goroutines it stops.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// rng draws the faults, lags and webhook choices; ids draws ids.
	rng, ids *rand.Rand
	closed   bool
	// Objects in order of creation, and by id. A record's pos is its index.
	paymentIntents []*paymentIntentRecord
	paymentByID    map[string]*paymentIntentRecord
	charges        map[string]*charge
	refunds        []*refundRecord
	refundByID     map[string]*refundRecord
	customers      []*Customer
	customerByID   map[string]*Customer
	events         []Event
	keys           keyStore
	timers         timers
	timerSeq       int
	bucket         bucket
	stats          Stats
	// second is the simulator's Unix second the last request came in, and
	// inSecond how many came in it.
	second   int64
	inSecond int
}

// New returns a Server with opts, its clock started.
func New(opts Options) (*Server, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("stripesim: %w", err)
	}
	opts.ProcessingFor = cmp.Or(opts.ProcessingFor, defaultProcessingFor)
	opts.RefundPendingFor = cmp.Or(opts.RefundPendingFor, defaultRefundPendingFor)
	opts.KeyRetention = cmp.Or(opts.KeyRetention, defaultKeyRetention)
	opts.Latency = cmp.Or(opts.Latency, defaultLatency)
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	seed := uint64(opts.Seed)
	s := &Server{
		opts:         opts,
		mux:          http.NewServeMux(),
		clock:        clock{start: opts.Start.Round(0), real: time.Now(), manual: opts.ManualClock},
		hc:           &http.Client{Timeout: 10 * time.Second},
		rng:          rand.New(rand.NewPCG(seed, 1)),
		ids:          rand.New(rand.NewPCG(seed, 2)),
		paymentByID:  map[string]*paymentIntentRecord{},
		charges:      map[string]*charge{},
		refundByID:   map[string]*refundRecord{},
		customerByID: map[string]*Customer{},
		keys:         keyStore{entries: map[keyID]*savedKey{}},
		stats:        Stats{ByStatus: map[int]int{}},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	if !opts.ManualClock {
		s.wg.Add(1)
		go s.tick()
	}
	return s, nil
}

// check reports options that cannot be used.
func (o Options) check() error {
	var sum float64
	for f, p := range o.FaultRates {
		if f <= FaultNone || int(f) >= len(faultNames) || p < 0 || p > 1 {
			return fmt.Errorf("fault rate %v of %v is not a probability of a fault", p, f)
		}
		sum += p
	}
	switch {
	case sum > 1:
		return fmt.Errorf("the fault rates add up to %v, more than 1", sum)
	case o.RateLimit < 0:
		return errors.New("the rate limit is negative")
	case o.ProcessingFor < 0, o.RefundPendingFor < 0, o.KeyRetention < 0, o.Latency < 0, o.WebhookDelay < 0:
		return errors.New("a duration is negative")
	case o.WebhookDrop < 0 || o.WebhookDrop > 1 || o.WebhookDuplicate < 0 || o.WebhookDuplicate > 1:
		return errors.New("a webhook probability is not between 0 and 1")
	case o.WebhookURL != "" && !strings.HasPrefix(o.WebhookSecret, "whsec_"):
		return errors.New("a webhook URL needs a whsec_… secret")
	}
	return nil
}

// ServeHTTP answers one request of Stripe's v1 API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the ticks and the webhook deliveries, those waiting and those
// under way, and waits for them to end. The Server still answers requests.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// tick settles the state every tick until Close.
func (s *Server) tick() {
	defer s.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			s.settle(s.clock.now())
			s.mu.Unlock()
		}
	}
}

// Now is the simulator clock's time.
func (s *Server) Now() time.Time { return s.clock.now() }

// Advance moves the simulator clock d forward, and applies what falls due.
// It panics on a negative d: the clock never goes back.
func (s *Server) Advance(d time.Duration) {
	if d < 0 {
		panic("stripesim: Advance by a negative duration")
	}
	s.clock.advanced.Add(int64(d))
	s.mu.Lock()
	s.settle(s.clock.now())
	s.mu.Unlock()
}

// clock is the simulator's time: start, plus the real time since real
// unless manual, plus what Advance added.
type clock struct {
	start, real time.Time
	manual      bool
	advanced    atomic.Int64
}

// now is the clock's time.
func (c *clock) now() time.Time {
	t := c.start.Add(time.Duration(c.advanced.Load()))
	if !c.manual {
		t = t.Add(time.Since(c.real))
	}
	return t
}

// timer is a change that falls due at a time of the simulator clock.
type timer struct {
	at   time.Time
	seq  int
	fire func(now time.Time)
}

// timers is a heap of timers, the earliest first, in order of scheduling
// when due at once.
type timers []timer

func (t timers) Len() int { return len(t) }
func (t timers) Less(i, j int) bool {
	if !t[i].at.Equal(t[j].at) {
		return t[i].at.Before(t[j].at)
	}
	return t[i].seq < t[j].seq
}
func (t timers) Swap(i, j int) { t[i], t[j] = t[j], t[i] }
func (t *timers) Push(x any)   { *t = append(*t, x.(timer)) }
func (t *timers) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

// after schedules fire d after now. The state is locked.
func (s *Server) after(now time.Time, d time.Duration, fire func(now time.Time)) {
	s.timerSeq++
	heap.Push(&s.timers, timer{at: now.Add(d), seq: s.timerSeq, fire: fire})
}

// settle fires every timer due at now, those they schedule included. The
// state is locked.
func (s *Server) settle(now time.Time) {
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		t := heap.Pop(&s.timers).(timer)
		t.fire(now)
	}
}

// newID is prefix and n random letters and digits. The state is locked.
func (s *Server) newID(prefix string, n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	for range n {
		b = append(b, alphabet[s.ids.IntN(len(alphabet))])
	}
	return string(b)
}

// PaymentIntents are copies of every PaymentIntent, oldest first, as they
// stand now.
func (s *Server) PaymentIntents() []PaymentIntent { return settledCopies(s, &s.paymentIntents) }

// Refunds are copies of every refund, oldest first, as they stand now.
func (s *Server) Refunds() []Refund { return settledCopies(s, &s.refunds) }

// settledCopies are copies of the records s holds at *records, once what
// has fallen due is settled.
func settledCopies[R interface{ copy() T }, T any](s *Server, records *[]R) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle(s.clock.now())
	out := make([]T, len(*records))
	for i, r := range *records {
		out[i] = r.copy()
	}
	return out
}

// Customers are copies of every customer, deleted ones included, oldest
// first.
func (s *Server) Customers() []Customer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Customer, len(s.customers))
	for i, c := range s.customers {
		out[i] = *c
		out[i].Metadata = maps.Clone(c.Metadata)
	}
	return out
}

// Events are every event made, oldest first, whether sent or not.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle(s.clock.now())
	return append([]Event(nil), s.events...)
}

// Stats are the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByStatus = maps.Clone(s.stats.ByStatus)
	return st
}

// countRequest counts a request received at now. The state is locked.
func (s *Server) countRequest(now time.Time) {
	s.stats.Requests++
	if sec := now.Unix(); sec != s.second {
		s.second, s.inSecond = sec, 0
	}
	s.inSecond++
	s.stats.MaxPerSecond = max(s.stats.MaxPerSecond, s.inSecond)
}
