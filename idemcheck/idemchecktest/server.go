// Package idemchecktest is a small API that takes Idempotency-Key as the
// contract idemcheck checks says, or breaks one rule of it on purpose: the
// servers idemcheck's own tests point it at. It is test-only code.
//
// POST /v1/things with {"amount": N} (N > 0) creates a thing, as caller
// "Bearer a" or "Bearer b"; GET /v1/things lists the caller's things, newest
// first, and GET /v1/things/{id} reads one. A body with "slow": true is
// executed until a duplicate of it arrives (or SlowHold passes), and every
// other until a duplicate arrives or Hold passes, so that duplicates always
// meet an execution in progress, however loaded the machine.
package idemchecktest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Flaw is the rule a server breaks.
type Flaw string

// The flaws, each breaking one rule.
const (
	Correct                Flaw = "correct"
	NoFingerprint          Flaw = "no-fingerprint"           // a key reused with another body replays the first
	NoLock                 Flaw = "no-lock"                  // a duplicate of a request in progress executes again
	LockWithout409         Flaw = "lock-without-409"         // a duplicate of a request in progress waits, then replays
	GlobalKeys             Flaw = "global-keys"              // one key space for every caller
	StoresValidationErrors Flaw = "stores-validation-errors" // a refusal by validation is stored on the key
	ReplayDiffers          Flaw = "replay-differs"           // a replay is rendered again, not the stored bytes
	NoKeyValidation        Flaw = "no-key-validation"        // any key, or none, is taken
	ForgetsEarly           Flaw = "forgets-early"            // keys are forgotten at half the retention
)

// Flaws lists every flaw, Correct first.
var Flaws = []Flaw{Correct, NoFingerprint, NoLock, LockWithout409, GlobalKeys, StoresValidationErrors, ReplayDiffers, NoKeyValidation, ForgetsEarly}

// How long an execution lasts when no duplicate of it arrives.
const (
	Hold     = 500 * time.Millisecond
	SlowHold = 2 * time.Second
)

// Server is the API. Keys are forgotten Retention after their request
// finished (never when zero), after which a key is a new request.
type Server struct {
	flaw      Flaw
	retention time.Duration
	mux       *http.ServeMux

	mu      sync.Mutex
	entries map[string]*entry // by scope and key
	things  []*thing          // in creation order
}

// entry is a key: its request's fingerprint, and its response once finished.
type entry struct {
	fingerprint [32]byte
	dup         chan struct{} // a duplicate arrived while in progress
	done        chan struct{} // closed when finished
	finished    time.Time
	status      int
	body        []byte
	thing       *thing
}

// thing is what a POST creates.
type thing struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Amount    int64     `json:"amount"`
	CreatedAt time.Time `json:"created_at"`
	owner     string
}

// New returns a server with flaw.
func New(flaw Flaw, retention time.Duration) *Server {
	s := &Server{flaw: flaw, retention: retention, mux: http.NewServeMux(), entries: map[string]*entry{}}
	s.mux.HandleFunc("POST /v1/things", s.create)
	s.mux.HandleFunc("GET /v1/things", s.list)
	s.mux.HandleFunc("GET /v1/things/{id}", s.read)
	return s
}

// Created returns how many things were created.
func (s *Server) Created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.things)
}

// ServeHTTP authenticates the caller, then routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("Authorization") {
	case "Bearer a", "Bearer b":
		s.mux.ServeHTTP(w, r)
	default:
		problem(w, http.StatusUnauthorized, "unauthorized")
	}
}

// owner is the caller of r, once authenticated.
func owner(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		problem(w, http.StatusBadRequest, "body")
		return
	}
	key, problemCode := s.key(r.Header.Values("Idempotency-Key"))
	if problemCode != "" {
		problem(w, http.StatusBadRequest, problemCode)
		return
	}
	var req struct {
		Amount int64 `json:"amount"`
		Slow   bool  `json:"slow"`
	}
	valid := json.Unmarshal(raw, &req) == nil && req.Amount > 0
	if key == nil { // no key, and the server takes that (NoKeyValidation)
		if !valid {
			problem(w, http.StatusBadRequest, "invalid_request")
			return
		}
		s.respond(w, s.execute(owner(r), req.Amount), false)
		return
	}
	scope := owner(r) + "\x00" + *key
	if s.flaw == GlobalKeys {
		scope = *key
	}
	fp := sha256.Sum256(raw)
	if s.flaw == NoFingerprint {
		fp = [32]byte{}
	}

	s.mu.Lock()
	s.expire()
	e := s.entries[scope]
	if e != nil && e.fingerprint != fp {
		s.mu.Unlock()
		problem(w, http.StatusUnprocessableEntity, "idempotency_key_mismatch")
		return
	}
	if e != nil {
		select {
		case <-e.done:
			s.mu.Unlock()
			s.respond(w, e, true)
			return
		default:
		}
		// In progress: decided before the execution is told of the
		// duplicate, so that it cannot finish in between.
		select {
		case e.dup <- struct{}{}:
		default:
		}
		switch s.flaw {
		case NoLock: // executed again below, the first keeping the key
		case LockWithout409:
			s.mu.Unlock()
			<-e.done
			s.respond(w, e, true)
			return
		default:
			s.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusConflict, "idempotency_key_in_use")
			return
		}
	}
	if !valid {
		if s.flaw == StoresValidationErrors {
			s.entries[scope] = s.refusal(fp)
		}
		s.mu.Unlock()
		problem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	mine := &entry{fingerprint: fp, dup: make(chan struct{}, 1), done: make(chan struct{})}
	if e == nil {
		s.entries[scope] = mine
	}
	s.mu.Unlock()

	hold := Hold
	if req.Slow {
		hold = SlowHold
	}
	select {
	case <-mine.dup:
	case <-time.After(hold):
	}
	done := s.execute(owner(r), req.Amount)
	s.mu.Lock()
	mine.status, mine.body, mine.thing, mine.finished = done.status, done.body, done.thing, time.Now()
	close(mine.done)
	s.mu.Unlock()
	s.respond(w, mine, false)
}

// key returns the key in the Idempotency-Key fields, nil for none the
// server takes without one, or the code of a problem.
func (s *Server) key(fields []string) (*string, string) {
	if s.flaw == NoKeyValidation {
		if len(fields) == 0 {
			return nil, ""
		}
		return &fields[0], ""
	}
	switch {
	case len(fields) == 0:
		return nil, "idempotency_key_missing"
	case len(fields) > 1:
		return nil, "idempotency_key_invalid"
	}
	k := fields[0]
	if strings.HasPrefix(k, `"`) {
		if len(k) < 2 || !strings.HasSuffix(k, `"`) || strings.ContainsAny(k[1:len(k)-1], `"\`) {
			return nil, "idempotency_key_invalid"
		}
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > 255 {
		return nil, "idempotency_key_invalid"
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return nil, "idempotency_key_invalid"
		}
	}
	return &k, ""
}

// expire forgets the keys past their retention. The caller holds mu.
func (s *Server) expire() {
	limit := s.retention
	if s.flaw == ForgetsEarly {
		limit /= 2
	}
	if limit == 0 {
		return
	}
	for k, e := range s.entries {
		if !e.finished.IsZero() && time.Since(e.finished) > limit {
			delete(s.entries, k)
		}
	}
}

// execute creates a thing and returns its response, finished.
func (s *Server) execute(owner string, amount int64) *entry {
	s.mu.Lock()
	t := &thing{ID: fmt.Sprintf("th_%d", len(s.things)+1), Object: "thing", Amount: amount, CreatedAt: time.Now().UTC(), owner: owner}
	s.things = append(s.things, t)
	s.mu.Unlock()
	body, _ := json.Marshal(t)
	return &entry{status: http.StatusCreated, body: body, thing: t}
}

// refusal is a finished key holding a validation refusal (StoresValidationErrors).
func (s *Server) refusal(fp [32]byte) *entry {
	e := &entry{fingerprint: fp, done: make(chan struct{}), finished: time.Now(), status: http.StatusBadRequest,
		body: problemBody(http.StatusBadRequest, "invalid_request")}
	close(e.done)
	return e
}

// respond writes e's response, marked as a replay when it is one.
func (s *Server) respond(w http.ResponseWriter, e *entry, replay bool) {
	body := e.body
	w.Header().Set("Content-Type", "application/json")
	if e.thing == nil {
		w.Header().Set("Content-Type", "application/problem+json")
	} else {
		w.Header().Set("Location", "/v1/things/"+e.thing.ID)
	}
	if replay {
		w.Header().Set("Idempotent-Replayed", "true")
		if s.flaw == ReplayDiffers && e.thing != nil {
			// Rendered again from the thing, with its time to the second.
			body = fmt.Appendf(nil, `{"id":%q,"object":"thing","amount":%d,"created_at":%q}`,
				e.thing.ID, e.thing.Amount, e.thing.CreatedAt.Format(time.RFC3339))
		}
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data := []*thing{}
	for i := len(s.things) - 1; i >= 0; i-- {
		if s.things[i].owner == owner(r) {
			data = append(data, s.things[i])
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var found *thing
	for _, t := range s.things {
		if t.ID == r.PathValue("id") && t.owner == owner(r) {
			found = t
		}
	}
	s.mu.Unlock()
	if found == nil {
		problem(w, http.StatusNotFound, "not_found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(found)
}

// problem writes an RFC 9457 problem.
func problem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(problemBody(status, code))
}

func problemBody(status int, code string) []byte {
	return fmt.Appendf(nil, `{"type":"https://things.example/problems/%s","title":%q,"status":%d,"code":%q}`,
		code, http.StatusText(status), status, code)
}
