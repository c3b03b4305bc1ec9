package testprocessor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
)

// Server is the test processor, in memory, over real HTTP: payments and
// their refunds, made at most once per idempotency key (a request made
// again under a key it keeps is answered with the first answer), and the
// notifications of what it did, sent in batches by Deliver. It answers no
// lookup, close or ledger: any other request is counted (Unexpected) and
// answered 404.
type Server struct {
	// URL is where it listens.
	URL string
	key []byte

	mu sync.Mutex
	// answers are the first answer under each key; forgotten keys are gone.
	answers map[string]answer
	// made counts what was made under each key, and posts the requests.
	made, posts map[string]int
	// refunds are the refunds received and not settled yet, by key.
	refunds map[string]Item
	// queued are the notifications not delivered yet.
	queued     []Item
	drop       int
	unexpected []string
	next       int
}

// answer is a stored answer.
type answer struct {
	status int
	body   []byte
}

// hmacKey signs the server's notifications, and Settings verify them.
const hmacKey = "test-processor-hmac-key"

// NewServer starts the test processor until t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{key: []byte(hmacKey), answers: map[string]answer{}, made: map[string]int{}, posts: map[string]int{},
		refunds: map[string]Item{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Settings are the adapter's settings for this server, with the other
// settings' defaults: keys kept a week, asked by making the call again.
func (s *Server) Settings() *Settings {
	return &Settings{URL: s.URL, HMACKey: hmacKey, KeyRetention: 7 * 24 * time.Hour, Lookup: operation.LookupReplay}
}

// DropAnswers has the next n calls made, and their answers lost: the
// connection is closed instead, as a processor's answer lost on the way.
func (s *Server) DropAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop = n
}

// Forget forgets key, as the processor does once its retention has passed:
// a request made again under it is made anew.
func (s *Server) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.answers, key)
}

// Made is how many payments or refunds were made under key: at most one.
func (s *Server) Made(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[key]
}

// Posts is how many requests were made under key.
func (s *Server) Posts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts[key]
}

// Unexpected lists the requests the processor has no answer for (a lookup,
// a close, a ledger page): none, for a service that reads its declaration.
func (s *Server) Unexpected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unexpected...)
}

// SettleRefund settles the refund received under key, queueing its
// notification: a REFUND that succeeded, or one that failed.
func (s *Server) SettleRefund(key string, success bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.refunds[key]
	if !ok {
		panic(fmt.Sprintf("testprocessor: no refund pending under %s", key))
	}
	delete(s.refunds, key)
	it.Success = fmt.Sprint(success)
	if !success {
		it.Reason = "the refund failed"
	}
	s.queue(it)
}

// Queued is how many notifications wait for Deliver.
func (s *Server) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queued)
}

// Batch is the body of a delivery of the queued notifications, each item
// signed, and empties the queue; forge, when set, changes each item before
// its body is written, after it was signed.
func (s *Server) Batch(forge func(*Item)) []byte {
	s.mu.Lock()
	items := s.queued
	s.queued = nil
	s.mu.Unlock()
	var n notification
	n.Live = "false"
	for _, it := range items {
		it.AdditionalData.HMACSignature = it.sign(s.key)
		if forge != nil {
			forge(&it)
		}
		n.Items = append(n.Items, struct {
			Item Item `json:"NotificationRequestItem"`
		}{it})
	}
	body, _ := json.Marshal(n)
	return body
}

// Deliver POSTs body, a Batch, to url, as the processor delivers its
// notifications, and returns the answer's status and body.
func Deliver(ctx context.Context, url string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// queue queues a notification; s.mu is held.
func (s *Server) queue(it Item) { s.queued = append(s.queued, it) }

// serve answers one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	paymentPath := r.URL.Path == "/payments"
	charge, refundPath := strings.CutPrefix(r.URL.Path, "/payments/")
	refundPath = refundPath && strings.HasSuffix(charge, "/refunds")
	s.mu.Lock()
	if r.Method != http.MethodPost || key == "" || !paymentPath && !refundPath {
		s.unexpected = append(s.unexpected, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	s.posts[key]++
	a, replay := s.answers[key]
	if !replay {
		if paymentPath {
			a = s.pay(key, body)
		} else {
			a = s.refund(key, strings.TrimSuffix(charge, "/refunds"), body)
		}
		s.answers[key] = a
	}
	drop := s.drop > 0
	if drop {
		s.drop--
	}
	s.mu.Unlock()
	if drop {
		// What was made stands; its answer is lost.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// pay makes the payment of a request under key, and queues its
// AUTHORISATION; s.mu is held.
func (s *Server) pay(key string, body []byte) answer {
	var req paymentRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Amount.Value <= 0 || !paymentMethods.MatchString(req.PaymentMethod) {
		return answer{status: http.StatusUnprocessableEntity, body: []byte(`{"errorCode":"validation"}`)}
	}
	s.next++
	resp := paymentResponse{PSPReference: fmt.Sprintf("psp_%d", s.next), ResultCode: "Authorised"}
	if req.PaymentMethod == "tok_refused" {
		resp.ResultCode, resp.RefusalReason = "Refused", "Refused"
	}
	s.made[key]++
	it := Item{EventCode: eventAuthorisation, Success: fmt.Sprint(resp.ResultCode == "Authorised"), PSPReference: resp.PSPReference,
		MerchantReference: key, Amount: req.Amount, Reason: resp.RefusalReason}
	s.queue(it)
	b, _ := json.Marshal(resp)
	return answer{status: http.StatusOK, body: b}
}

// refund receives the refund of payment psp under key, to be settled later
// (SettleRefund); s.mu is held.
func (s *Server) refund(key, psp string, body []byte) answer {
	var req refundRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Amount.Value <= 0 || psp == "" {
		return answer{status: http.StatusUnprocessableEntity, body: []byte(`{"errorCode":"validation"}`)}
	}
	s.next++
	resp := refundResponse{PSPReference: fmt.Sprintf("psp_%d", s.next), Status: "received"}
	s.made[key]++
	s.refunds[key] = Item{EventCode: eventRefund, PSPReference: resp.PSPReference, MerchantReference: key, Amount: req.Amount}
	b, _ := json.Marshal(resp)
	return answer{status: http.StatusCreated, body: b}
}
