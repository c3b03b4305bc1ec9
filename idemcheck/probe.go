package idemcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// probe is one check's view of the server: it sends the check's requests
// and keeps each exchange as evidence.
type probe struct {
	cfg    *Config
	client *http.Client
	run    string // this run's id, in every key, so that runs never share a key
	check  string
	start  time.Time // the check's, which exchanges are timed from
	seq    atomic.Int64

	mu  sync.Mutex
	log []*Exchange
}

// Exchange is one request and its answer, as shown in evidence.
type Exchange struct {
	Caller   int      `json:"caller"`
	Request  string   `json:"request"`            // "POST http://…"
	Headers  []Header `json:"headers,omitempty"`  // sent, credentials masked
	Body     string   `json:"body,omitempty"`     // sent
	Status   string   `json:"status,omitempty"`   // "201 Created"
	Answer   []Header `json:"answer,omitempty"`   // the headers that matter here
	Response string   `json:"response,omitempty"` // the body received, cut at 2 KiB
	Error    string   `json:"error,omitempty"`
	At       float64  `json:"at_ms"` // sent, after the check began
	Elapsed  float64  `json:"elapsed_ms"`

	status   int
	header   http.Header
	body     []byte
	answered time.Time
}

// shownHeaders are the answer's headers that the contract is about.
var shownHeaders = []string{"Content-Type", "Location", "Retry-After", "Idempotency-Key", "Link"}

// maxShown bounds a body kept as evidence.
const maxShown = 2048

// newRunID returns a random id for a run's keys.
func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newKey returns a header value for a fresh key of this check: quoted in the
// IETF dialect (an sf-string), bare in Stripe's.
func (p *probe) newKey() string {
	k := fmt.Sprintf("idemcheck-%s-%s-%d", p.run, p.check, p.seq.Add(1))
	if p.cfg.Dialect == IETF {
		return `"` + k + `"`
	}
	return k
}

// post sends the check's POST as caller (1 or 2) with one Idempotency-Key
// field per value of keys (none for nil) and extra headers.
func (p *probe) post(ctx context.Context, caller int, keys []string, body string, extra ...Header) *Exchange {
	return p.send(ctx, caller, http.MethodPost, p.cfg.URL, keys, body, extra)
}

// get sends a GET as caller.
func (p *probe) get(ctx context.Context, caller int, url string) *Exchange {
	return p.send(ctx, caller, http.MethodGet, url, nil, "", nil)
}

// send sends one request and records the exchange. A 429 with a short
// Retry-After is sent again after it, at most three times: a rate limit is
// not part of the contract checked.
func (p *probe) send(ctx context.Context, caller int, method, url string, keys []string, body string, extra []Header) *Exchange {
	var ex *Exchange
	for attempt := 0; ; attempt++ {
		ex = p.sendOnce(ctx, caller, method, url, keys, body, extra)
		wait, err := strconv.Atoi(ex.header.Get("Retry-After"))
		if ex.status != http.StatusTooManyRequests || err != nil || wait > 5 || attempt == 3 {
			break
		}
		select {
		case <-ctx.Done():
			return ex
		case <-time.After(time.Duration(wait)*time.Second + 50*time.Millisecond):
		}
	}
	return ex
}

func (p *probe) sendOnce(ctx context.Context, caller int, method, url string, keys []string, body string, extra []Header) *Exchange {
	start := time.Now()
	ex := p.record(&Exchange{Caller: caller, Request: method + " " + url, Body: body, At: ms(start.Sub(p.start))})
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		ex.Error = err.Error()
		return ex
	}
	auth := p.cfg.Auth
	if caller == 2 {
		auth = p.cfg.Auth2
	}
	set := func(h Header, shown string) {
		req.Header.Add(h.Name, h.Value)
		ex.Headers = append(ex.Headers, Header{h.Name, shown})
	}
	set(auth, maskCredential(auth.Value))
	if body != "" {
		set(Header{"Content-Type", "application/json"}, "application/json")
	}
	for _, h := range append(append([]Header(nil), p.cfg.Headers...), extra...) {
		req.Header.Del(h.Name) // a header given replaces the default
		set(h, h.Value)
	}
	for _, k := range keys {
		set(Header{"Idempotency-Key", k}, k)
	}
	res, err := p.client.Do(req)
	if err == nil {
		ex.body, err = io.ReadAll(res.Body)
		res.Body.Close()
		ex.status, ex.header = res.StatusCode, res.Header
	}
	ex.answered = time.Now()
	ex.Elapsed = ms(ex.answered.Sub(start))
	if err != nil {
		ex.Error = err.Error()
		ex.status, ex.header = 0, http.Header{}
		return ex
	}
	ex.Status = strconv.Itoa(res.StatusCode) + " " + http.StatusText(res.StatusCode)
	names := shownHeaders
	if p.cfg.ReplayedHeader != "" {
		names = append([]string{p.cfg.ReplayedHeader}, shownHeaders...)
	}
	for _, name := range names {
		for _, v := range res.Header.Values(name) {
			ex.Answer = append(ex.Answer, Header{name, v})
		}
	}
	ex.Response = string(ex.body)
	if len(ex.Response) > maxShown {
		ex.Response = ex.Response[:maxShown] + fmt.Sprintf("… (%d bytes)", len(ex.body))
	}
	return ex
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// record keeps ex as evidence, in the order the requests were sent; its
// sender fills it in, and it is read once the check is over.
func (p *probe) record(ex *Exchange) *Exchange {
	p.mu.Lock()
	p.log = append(p.log, ex)
	p.mu.Unlock()
	return ex
}

// maskCredential hides a credential but for its scheme: evidence is printed
// and stored by CI.
func maskCredential(v string) string {
	if scheme, _, ok := strings.Cut(v, " "); ok {
		return scheme + " ****"
	}
	return "****"
}

// replayed reports whether the answer is marked as a replay. With no
// replay header configured, nothing is.
func (p *probe) replayed(ex *Exchange) bool {
	return p.cfg.ReplayedHeader != "" && strings.EqualFold(ex.header.Get(p.cfg.ReplayedHeader), "true")
}

// id returns what the answer says it created: the configured member of its
// JSON body, else its Location's last segment; "" for none.
func (p *probe) id(ex *Exchange) string {
	if id := jsonMember(ex.body, p.cfg.IDField); id != "" {
		return id
	}
	if loc := ex.header.Get("Location"); loc != "" {
		return loc[strings.LastIndex(loc, "/")+1:]
	}
	return ""
}

// describe is an answer in a few words, for a finding.
func describe(ex *Exchange) string {
	if ex.Error != "" {
		return "no answer (" + ex.Error + ")"
	}
	return ex.Status
}

// executed returns the id a fresh execution created, or a finding saying why
// ex is not one: a 2xx, not marked as a replay, naming what it created.
func (p *probe) executed(ex *Exchange) (string, string) {
	switch {
	case ex.status < 200 || ex.status > 299:
		return "", fmt.Sprintf("answered %s, not a 2xx", describe(ex))
	case p.replayed(ex):
		return "", fmt.Sprintf("answered as a replay (%s: true)", p.cfg.ReplayedHeader)
	}
	id := p.id(ex)
	if id == "" {
		return "", fmt.Sprintf("its answer names nothing created (no %q member, no Location)", p.cfg.IDField)
	}
	return id, ""
}

// snapshot returns the ids the list shows now, or nil without -list.
func (p *probe) snapshot(ctx context.Context) (map[string]bool, string) {
	if p.cfg.List == "" {
		return nil, ""
	}
	ex := p.get(ctx, 1, p.cfg.List)
	if ex.status != http.StatusOK {
		return nil, fmt.Sprintf("the list (-list) answered %s", describe(ex))
	}
	ids := map[string]bool{}
	collectIDs(ex.body, p.cfg.IDField, ids)
	return ids, ""
}

// createdSince returns the ids listed now that before did not hold; nothing
// without -list.
func (p *probe) createdSince(ctx context.Context, before map[string]bool) ([]string, string) {
	if before == nil {
		return nil, ""
	}
	after, problem := p.snapshot(ctx)
	var created []string
	for id := range after {
		if !before[id] {
			created = append(created, id)
		}
	}
	return created, problem
}

// exists says, with -get, whether caller can GET the resource id; ok
// without it.
func (p *probe) exists(ctx context.Context, caller int, id string) string {
	if p.cfg.Get == "" {
		return ""
	}
	ex := p.get(ctx, caller, strings.ReplaceAll(p.cfg.Get, "{id}", id))
	if ex.status != http.StatusOK {
		return fmt.Sprintf("GET of %s (-get) answered %s", id, describe(ex))
	}
	return ""
}

// sameBytes returns "" when a and b are equal, else where they first differ.
func sameBytes(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("differs at byte %d of %d/%d (%q vs %q)", i, len(a), len(b), around(a, i), around(b, i))
}

// around is a few bytes of b from i, for a difference.
func around(b []byte, i int) string {
	end := min(i+16, len(b))
	return string(b[i:end])
}
