package stripesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// apiVersion is the Stripe-Version the simulator answers with and writes in
// its events: stripe-go v83's.
const apiVersion = "2025-10-29.clover"

// maxBody bounds a request's form.
const maxBody = 1 << 20

// maxKeyLength is the longest idempotency key Stripe takes.
const maxKeyLength = 255

// The error types of Stripe's v1 API.
const (
	typeAPI            = "api_error"
	typeCard           = "card_error"
	typeIdempotency    = "idempotency_error"
	typeInvalidRequest = "invalid_request_error"
)

// handler validates and executes one endpoint's request, with the Server's
// state locked: v, answered 200, or the error.
type handler func(c *call) (v any, err *apiError)

// call is one request as its endpoint sees it.
type call struct {
	r                      *http.Request
	form                   url.Values
	apiKey, idempotencyKey string
	requestID              string
	// now is the simulator's time the endpoint executes at.
	now time.Time
}

// answer is what a request is answered: a status and a JSON body.
type answer struct {
	status int
	body   []byte
	// original is the request whose saved answer this one replays, "" if
	// none.
	original string
	// lose closes the connection instead of answering.
	lose bool
}

// routes registers every endpoint, and Stripe's 404 for any other.
func (s *Server) routes() {
	for pattern, h := range map[string]handler{
		"POST /v1/payment_intents":             s.createPaymentIntent,
		"GET /v1/payment_intents":              s.listPaymentIntents,
		"GET /v1/payment_intents/search":       s.searchPaymentIntents,
		"GET /v1/payment_intents/{id}":         s.retrievePaymentIntent,
		"POST /v1/payment_intents/{id}/cancel": s.cancelPaymentIntent,
		"POST /v1/refunds":                     s.createRefund,
		"GET /v1/refunds":                      s.listRefunds,
		"GET /v1/refunds/{id}":                 s.retrieveRefund,
		"POST /v1/customers":                   s.createCustomer,
		"GET /v1/customers/{id}":               s.retrieveCustomer,
		"DELETE /v1/customers/{id}":            s.deleteCustomer,
		"/":                                    unrecognized,
	} {
		s.mux.HandleFunc(pattern, s.endpoint(h))
	}
}

// unrecognized answers a method and path Stripe has no endpoint for.
func unrecognized(c *call) (any, *apiError) {
	return nil, &apiError{status: http.StatusNotFound, body: errorJSON{Type: typeInvalidRequest,
		Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", c.r.Method, c.r.URL.Path)}}
}

// endpoint serves h with every step the package doc lists.
func (s *Server) endpoint(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &call{r: r, idempotencyKey: strings.TrimSpace(r.Header.Get("Idempotency-Key"))}
		s.write(w, c, s.serve(c, h))
	}
}

// serve makes the answer to c.
func (s *Server) serve(c *call, h handler) answer {
	s.mu.Lock()
	c.requestID = s.newID("req_", 14)
	now := s.clock.now()
	s.countRequest(now)
	s.mu.Unlock()

	key, err := authenticate(c.r)
	if err != nil {
		return errorAnswer(err)
	}
	c.apiKey = key
	if err := c.parse(); err != nil {
		return errorAnswer(err)
	}
	if !s.admit(now) {
		return errorAnswer(rateLimited())
	}
	fault := s.fault(c)
	switch fault {
	case Fault429:
		return errorAnswer(rateLimited())
	case Fault500Before:
		return errorAnswer(internalError())
	}
	keyed := c.r.Method == http.MethodPost && c.idempotencyKey != ""
	if keyed {
		if a, done := s.reserve(c); done {
			return a
		}
	}
	a, executed := errorAnswer(internalError()), true
	if fault != Fault500Saved {
		a, executed = s.execute(c, h)
	}
	if fault == FaultLatency {
		s.wait(c.r.Context(), s.opts.Latency)
	}
	if keyed {
		s.finish(c, a, executed)
	}
	a.lose = fault == FaultLoseAnswer
	return a
}

// execute runs h with the state locked and settled, and reports whether it
// began executing: whether its answer is saved under the key.
func (s *Server) execute(c *call, h handler) (answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.now = s.clock.now()
	s.settle(c.now)
	v, err := h(c)
	if err != nil {
		return errorAnswer(err), err.executed
	}
	return answer{status: http.StatusOK, body: mustJSON(v)}, true
}

// wait waits d of real time, or less if ctx or the Server ends first.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	return false
}

// write answers a, or closes the connection if a is lost.
func (s *Server) write(w http.ResponseWriter, c *call, a answer) {
	if a.lose {
		s.mu.Lock()
		s.stats.Lost++
		s.mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
			return
		}
		// Without a connection to hijack (HTTP/2), the stream is reset.
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", c.requestID)
	h.Set("Stripe-Version", apiVersion)
	if c.idempotencyKey != "" && c.r.Method == http.MethodPost {
		h.Set("Idempotency-Key", c.idempotencyKey)
	}
	if a.original != "" {
		h.Set("Idempotent-Replayed", "true")
		h.Set("Original-Request", a.original)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
	s.mu.Lock()
	s.stats.ByStatus[a.status]++
	if a.original != "" {
		s.stats.Replayed++
	}
	s.mu.Unlock()
}

// authenticate returns the request's secret key: Bearer, or HTTP Basic's
// user, as Stripe takes either.
func authenticate(r *http.Request) (string, *apiError) {
	var key string
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = strings.TrimSpace(v)
	} else if user, _, ok := r.BasicAuth(); ok {
		key = user
	}
	switch {
	case key == "":
		return "", &apiError{status: http.StatusUnauthorized, body: errorJSON{Type: typeInvalidRequest,
			Message: "You did not provide an API key. You need to provide your API key in the Authorization header, " +
				"using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}}
	case !strings.HasPrefix(key, "sk_"):
		return "", &apiError{status: http.StatusUnauthorized, body: errorJSON{Type: typeInvalidRequest,
			Message: "Invalid API Key provided: " + masked(key)}}
	}
	return key, nil
}

// masked is key with all but its ends hidden, as Stripe quotes one.
func masked(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

// parse reads the request's parameters: a POST's form-encoded body, or the
// query.
func (c *call) parse() *apiError {
	c.r.Body = http.MaxBytesReader(nil, c.r.Body, maxBody)
	if err := c.r.ParseForm(); err != nil {
		return badRequest("", "", "Invalid request: the parameters cannot be read: "+err.Error())
	}
	c.form = c.r.Form
	if len(c.idempotencyKey) > maxKeyLength {
		return badRequest("", "", fmt.Sprintf("Idempotency keys can be at most %d characters long.", maxKeyLength))
	}
	return nil
}

// apiError is an error answer: its status, its error member, and whether
// the endpoint had begun executing (a card declined after its
// PaymentIntent was made), so that it is saved under the key.
type apiError struct {
	status   int
	executed bool
	body     errorJSON
}

// errorJSON is the error member of Stripe's error answer.
type errorJSON struct {
	Type          string             `json:"type"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
	Message       string             `json:"message"`
	Param         string             `json:"param,omitempty"`
	Charge        string             `json:"charge,omitempty"`
	DocURL        string             `json:"doc_url,omitempty"`
	PaymentIntent *paymentIntentJSON `json:"payment_intent,omitempty"`
	PaymentMethod *paymentMethodJSON `json:"payment_method,omitempty"`
}

// badRequest is a 400 invalid_request_error, made before executing.
func badRequest(param, code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest,
		body: errorJSON{Type: typeInvalidRequest, Code: code, Param: param, Message: message}}
}

// noSuch is Stripe's resource_missing for object id of kind: 404 for the
// object a path names, 400 for one a parameter names.
func noSuch(status int, kind, id, param string) *apiError {
	return &apiError{status: status, body: errorJSON{Type: typeInvalidRequest, Code: "resource_missing", Param: param,
		Message: fmt.Sprintf("No such %s: '%s'", kind, id)}}
}

// pathObject is the object the request's path names, looked up in byID, or
// Stripe's 404 for a missing object of kind, param naming what was asked.
func pathObject[T any](c *call, byID map[string]T, kind, param string) (T, *apiError) {
	id := c.r.PathValue("id")
	o, ok := byID[id]
	if !ok {
		return o, noSuch(http.StatusNotFound, kind, id, param)
	}
	return o, nil
}

// retrieve answers a GET of the object the path names: the parameters
// checked against allowed, the object found as pathObject finds it, and
// its wire form.
func retrieve[T, W any](c *call, byID map[string]T, wire func(T) W, kind, param string, allowed ...string) (any, *apiError) {
	if f := c.params(allowed...); f.err != nil {
		return nil, f.err
	}
	o, err := pathObject(c, byID, kind, param)
	if err != nil {
		return nil, err
	}
	return wire(o), nil
}

// rateLimited is Stripe's 429.
func rateLimited() *apiError {
	return &apiError{status: http.StatusTooManyRequests, body: errorJSON{Type: typeInvalidRequest, Code: "rate_limit",
		Message: "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits."}}
}

// internalError is Stripe's 500.
func internalError() *apiError {
	return &apiError{status: http.StatusInternalServerError, body: errorJSON{Type: typeAPI,
		Message: "Sorry, something went wrong. We've already been notified of the problem. " +
			"If you have any questions, we can help at https://support.stripe.com/."}}
}

// errorAnswer is the answer that carries e.
func errorAnswer(e *apiError) answer {
	body := e.body
	if body.Code != "" {
		body.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(body.Code, "_", "-")
	}
	return answer{status: e.status, body: mustJSON(map[string]errorJSON{"error": body})}
}

// mustJSON is v as JSON; every value answered is made to be encodable.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("stripesim: encode an answer: %v", err))
	}
	return b
}
