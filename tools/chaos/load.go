package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/payments/client"
)

// The tenants: the demo tenants, whose keys the seed creates, which the load
// drives, and the tarpit tenant (tarpit.go), which the run creates.
var tenants = []struct{ id, apiKey string }{{"ten_acme", "sk_test_acme"}, {"ten_globex", "sk_test_globex"}, {tarpitTenantID, "sk_test_tarpit"}}

// method is a payment method the load sends, and its weight.
type method struct {
	token  string
	weight int
}

// fakeMethods are the fake processor's: mostly cards that succeed, and
// every token with an outcome of its own.
var fakeMethods = []method{
	{"pm_card_visa", 55}, {"pm_card_mastercard", 10}, {"pm_card_declined", 8}, {"pm_card_insufficient_funds", 5},
	{"pm_card_processing_error", 7}, {"pm_card_timeout", 15},
}

// op is one operation sent under one idempotency key.
type op struct {
	refund  bool
	tenant  int
	key     string
	body    []byte
	method  string // of a payment
	payment string // the payment's id, once known
	amount  int64
	sentAt  time.Time
}

// recorder is the HTTP transport under every client: it keeps the first
// final answer of each key and checks that every later final answer under
// the same key is the same bytes, during the run, not only at its end.
type recorder struct {
	next http.RoundTripper

	mu         sync.Mutex
	final      map[string][]byte // by tenant API key + idempotency key
	mismatches []string
	serverErrs atomic.Int64 // 500s: a bug, whatever the input
	unexpected []string     // 422s and 404s, which a correct client never gets
	accepted   []answered   // POSTs answered 201, 202 or 402 (failover.go)
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	res, err := r.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return res, err
	}
	body, readErr := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if readErr != nil {
		return res, nil // the client sees the cut body and retries
	}
	var problem struct{ Code string }
	_ = json.Unmarshal(body, &problem)
	id := req.Header.Get("Authorization") + " " + req.Header.Get("Idempotency-Key")
	r.mu.Lock()
	defer r.mu.Unlock()
	switch res.StatusCode {
	case http.StatusCreated, http.StatusAccepted, http.StatusPaymentRequired:
		r.accepted = append(r.accepted, answered{sent, time.Now()})
	}
	switch {
	case res.StatusCode == http.StatusInternalServerError:
		r.serverErrs.Add(1)
	case res.StatusCode == http.StatusUnprocessableEntity || res.StatusCode == http.StatusNotFound:
		r.unexpected = append(r.unexpected, fmt.Sprintf("%d %s %s", res.StatusCode, id, body))
	case !finalAnswer(res.StatusCode, problem.Code):
	case r.final[id] == nil:
		r.final[id] = body
	case !bytes.Equal(r.final[id], body):
		r.mismatches = append(r.mismatches, fmt.Sprintf("%s: first %s, then %s", id, r.final[id], body))
	}
	return res, nil
}

// finalAnswer reports whether an answer is stored and replayed: a final
// outcome, not a "still working" or "try again".
func finalAnswer(status int, code string) bool {
	switch status {
	case http.StatusCreated, http.StatusPaymentRequired, http.StatusBadGateway, http.StatusBadRequest:
		return true
	case http.StatusConflict:
		return code == "payment_not_refundable"
	}
	return false
}

// respondAsync asks the API not to wait for the operation to finish, with
// RFC 7240's Prefer: respond-async.
type respondAsync struct{ next http.RoundTripper }

func (t respondAsync) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Prefer", "respond-async")
	return t.next.RoundTrip(req)
}

// firstFinal is the first final answer recorded under key, if any.
func (r *recorder) firstFinal(apiKey, key string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final["Bearer "+apiKey+" "+key]
}

// load drives operations through the public client until the load phase
// ends, from many goroutines, against both APIs and both tenants.
type load struct {
	rec     *recorder
	clients [2][3][2]*client.Client // [api][tenant][async]
	seed    uint64

	mu      sync.Mutex
	ops     []*op
	sent    atomic.Int64 // requests the load asked the client to make
	dups    atomic.Int64
	resends atomic.Int64
	refunds atomic.Int64
	async   atomic.Int64
	// methods are the payment methods sent, the processor's test cards.
	methods []method
}

func newLoad(apiURLs [2]string, seed uint64, methods []method) *load {
	rec := &recorder{next: &http.Transport{MaxIdleConnsPerHost: 64}, final: map[string][]byte{}}
	l := &load{rec: rec, seed: seed, methods: methods}
	for a, url := range apiURLs {
		for t, tenant := range tenants {
			retries := []client.Option{client.WithMaxAttempts(6), client.WithBackoff(100*time.Millisecond, 2*time.Second)}
			l.clients[a][t][0] = client.New(url, tenant.apiKey,
				append(retries, client.WithHTTPClient(&http.Client{Transport: rec, Timeout: 20 * time.Second}))...)
			l.clients[a][t][1] = client.New(url, tenant.apiKey,
				append(retries, client.WithHTTPClient(&http.Client{Transport: respondAsync{rec}, Timeout: 20 * time.Second}))...)
		}
	}
	return l
}

// run runs n goroutines until ctx ends.
func (l *load) run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(l.seed, uint64(g)))
			for i := 0; ctx.Err() == nil; i++ {
				l.scenario(ctx, rng, fmt.Sprintf("chaos-%d-%d-%d", l.seed, g, i))
			}
		})
	}
	wg.Wait()
}

// scenario is one payment, sent as a client would (sometimes twice at once,
// sometimes again later, sometimes asking not to wait), and for a payment
// that succeeded sometimes refunds, sometimes racing ones that together
// exceed it.
func (l *load) scenario(ctx context.Context, rng *rand.Rand, key string) {
	o := &op{tenant: rng.IntN(tarpitTenant), key: key, method: pick(rng, l.methods), amount: int64(100 + rng.IntN(9900)), sentAt: time.Now()}
	o.body, _ = json.Marshal(client.CreatePaymentParams{Amount: o.amount, Currency: "USD", PaymentMethod: o.method})
	l.add(o)
	async := rng.IntN(5) == 0
	if async {
		l.async.Add(1)
	}
	p := l.send(ctx, rng, o, async, rng.IntN(6) == 0)
	if p == nil || p.Status != client.StatusSucceeded {
		return
	}
	if rng.IntN(10) == 0 { // re-sent after a delay, as a client whose answer was lost
		l.resends.Add(1)
		sleep(ctx, time.Duration(rng.IntN(1500))*time.Millisecond)
		l.send(ctx, rng, o, false, false)
	}
	switch r := rng.IntN(10); {
	case r < 2: // one refund, of part or of all
		l.refund(ctx, rng, o, key+"-r0", o.amount/int64(1+rng.IntN(2)))
	case r < 4: // two or three at once, that together exceed the payment
		var wg sync.WaitGroup
		for j := range 2 + rng.IntN(2) {
			amount := o.amount * 6 / 10
			rrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(j)))
			wg.Go(func() { l.refund(ctx, rrng, o, fmt.Sprintf("%s-r%d", key, j), amount) })
		}
		wg.Wait()
	}
}

// refund sends one refund of o under key.
func (l *load) refund(ctx context.Context, rng *rand.Rand, o *op, key string, amount int64) {
	r := &op{refund: true, tenant: o.tenant, key: key, payment: o.payment, amount: amount, sentAt: time.Now()}
	r.body, _ = json.Marshal(client.CreateRefundParams{Amount: &amount})
	l.add(r)
	l.refunds.Add(1)
	l.send(ctx, rng, r, rng.IntN(4) == 0, rng.IntN(6) == 0)
}

// send sends o through a random API, twice at once through both when dup,
// and returns the payment it ended with, if any.
func (l *load) send(ctx context.Context, rng *rand.Rand, o *op, async, dup bool) *client.Payment {
	a, w := rng.IntN(2), 0
	if async {
		w = 1
	}
	if !dup {
		return l.once(ctx, l.clients[a][o.tenant][w], o)
	}
	l.dups.Add(1)
	var (
		wg    sync.WaitGroup
		first *client.Payment
	)
	wg.Go(func() { first = l.once(ctx, l.clients[a][o.tenant][w], o) })
	wg.Go(func() { l.once(ctx, l.clients[1-a][o.tenant][w], o) })
	wg.Wait()
	return first
}

// once makes one client call for o. The client retries with the same key
// on its own; when it runs out of attempts, the end of the run sends again.
func (l *load) once(ctx context.Context, c *client.Client, o *op) *client.Payment {
	l.sent.Add(1)
	if o.refund {
		var p client.CreateRefundParams
		_ = json.Unmarshal(o.body, &p)
		_, _, _ = c.CreateRefund(ctx, o.key, o.payment, p)
		return nil
	}
	var p client.CreatePaymentParams
	_ = json.Unmarshal(o.body, &p)
	pay, _, err := c.CreatePayment(ctx, o.key, p)
	if pay != nil {
		l.mu.Lock()
		o.payment = pay.ID
		l.mu.Unlock()
	}
	if err != nil && !errors.As(err, new(*client.Error)) {
		return nil
	}
	return pay
}

// resendAll sends every operation of ops once more, with its key, from 16
// goroutines at once.
func (l *load) resendAll(ctx context.Context, ops []*op, stream uint64) {
	next := make(chan *op)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(l.seed+stream, uint64(g)))
			for o := range next {
				l.send(ctx, rng, o, false, false)
			}
		})
	}
	for _, o := range ops {
		next <- o
	}
	close(next)
	wg.Wait()
}

func (l *load) add(o *op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, o)
}

// all returns every operation sent so far.
func (l *load) all() []*op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*op(nil), l.ops...)
}

// pick draws one of methods by weight.
func pick(rng *rand.Rand, methods []method) string {
	total := 0
	for _, m := range methods {
		total += m.weight
	}
	n := rng.IntN(total)
	for _, m := range methods {
		if n < m.weight {
			return m.token
		}
		n -= m.weight
	}
	return methods[0].token
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
