package stripesim

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// keyID names an idempotency key: keys are scoped to the API key.
type keyID struct{ apiKey, key string }

// savedKey is what a key holds: the request that first used it and, once
// it is done, its answer.
type savedKey struct {
	method, path string
	// params is the first request's parameters (fingerprint).
	params    string
	requestID string
	at        time.Time
	done      bool
	status    int
	body      []byte
}

// keyStore holds the keys, and their order of first use, the order they
// are pruned in.
type keyStore struct {
	entries map[keyID]*savedKey
	order   []keyRef
}

// keyRef is one key in the order of first use.
type keyRef struct {
	id keyID
	e  *savedKey
}

// prune forgets the answered keys first used retention or more before
// now. A key still in flight is kept until it is answered, then forgotten
// when next looked up.
func (k *keyStore) prune(now time.Time, retention time.Duration) {
	for len(k.order) > 0 && now.Sub(k.order[0].e.at) >= retention {
		ref := k.order[0]
		k.order = k.order[1:]
		if k.entries[ref.id] == ref.e && ref.e.done {
			delete(k.entries, ref.id)
		}
	}
}

// reserve looks c's key up. done reports that the lookup answered c: a
// replay of the saved answer, a 409 while the key is in flight, or a 400
// idempotency_error for a key used on another endpoint or with other
// parameters. Otherwise the key is reserved for c, in flight until finish.
func (s *Server) reserve(c *call) (answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.now()
	retention := s.opts.KeyRetention
	s.keys.prune(now, retention)
	id := keyID{c.apiKey, c.idempotencyKey}
	e := s.keys.entries[id]
	if e != nil && e.done && now.Sub(e.at) >= retention {
		delete(s.keys.entries, id)
		e = nil
	}
	params := fingerprint(c.form)
	switch {
	case e == nil:
		e = &savedKey{method: c.r.Method, path: c.r.URL.Path, params: params, requestID: c.requestID, at: now}
		s.keys.entries[id] = e
		s.keys.order = append(s.keys.order, keyRef{id, e})
		return answer{}, false
	case !e.done:
		return errorAnswer(&apiError{status: http.StatusConflict, body: errorJSON{Type: typeInvalidRequest,
			Code: "idempotency_key_in_use", Message: fmt.Sprintf("There is currently another in-progress request using "+
				"this Idempotent Key (that probably means you submitted twice, and the other request is still going "+
				"through): %s. Please try again later.", c.idempotencyKey)}}), true
	case e.method != c.r.Method || e.path != c.r.URL.Path:
		return errorAnswer(&apiError{status: http.StatusBadRequest, body: errorJSON{Type: typeIdempotency,
			Message: fmt.Sprintf("Keys for idempotent requests can only be used for the same endpoint they were first "+
				"used for ('%s %s' vs '%s %s'). Try using a key other than '%s' if you meant to execute a different request.",
				c.r.Method, c.r.URL.Path, e.method, e.path, c.idempotencyKey)}}), true
	case e.params != params:
		return errorAnswer(&apiError{status: http.StatusBadRequest, body: errorJSON{Type: typeIdempotency,
			Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were "+
				"first used with. Try using a key other than '%s' if you meant to execute a different request.",
				c.idempotencyKey)}}), true
	}
	return answer{status: e.status, body: e.body, original: e.requestID}, true
}

// finish ends c's hold on its key: it saves a if the endpoint began
// executing, and otherwise frees the key, so that a retry executes anew.
func (s *Server) finish(c *call, a answer, executed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := keyID{c.apiKey, c.idempotencyKey}
	e := s.keys.entries[id]
	if e == nil || e.requestID != c.requestID {
		return
	}
	if !executed {
		delete(s.keys.entries, id)
		return
	}
	e.done, e.status, e.body = true, a.status, a.body
}

// fingerprint is form's decoded values in one order, so that two requests
// with the same parameters, sent in any order, have the same.
func fingerprint(form url.Values) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(form)) {
		values := slices.Clone(form[k])
		slices.Sort(values)
		for _, v := range values {
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
			b.WriteByte('&')
		}
	}
	return b.String()
}
