package stripesim

import (
	"net/url"
	"time"
)

// Fault is what goes wrong with one request.
type Fault int

// The faults. Every one but FaultNone is one Stripe, or the network to it,
// can be seen to have.
const (
	// FaultNone answers the request as it comes.
	FaultNone Fault = iota
	// Fault500Before answers 500 api_error before executing: nothing is
	// made, nothing saved under the key.
	Fault500Before
	// Fault500Saved answers 500 api_error and saves it under the key:
	// nothing is made, and a retry with the key is answered the 500 again.
	Fault500Saved
	// FaultLoseAnswer executes the request, commits and saves its answer,
	// then closes the connection without answering.
	FaultLoseAnswer
	// FaultLatency adds Options.Latency after executing, before answering,
	// while the request still holds its key.
	FaultLatency
	// Fault429 answers 429 rate_limit, as the rate limit does: nothing is
	// executed, nothing saved.
	Fault429
)

// faultNames are the faults' names, in the order FaultRates are drawn in.
var faultNames = [...]string{
	FaultNone:       "none",
	Fault500Before:  "500-before",
	Fault500Saved:   "500-saved",
	FaultLoseAnswer: "lose-answer",
	FaultLatency:    "latency",
	Fault429:        "429",
}

// FaultNamed is the fault of a name String gives, and whether there is one.
func FaultNamed(name string) (Fault, bool) {
	for f, n := range faultNames {
		if n == name {
			return Fault(f), true
		}
	}
	return FaultNone, false
}

// String names f.
func (f Fault) String() string {
	if f < 0 || int(f) >= len(faultNames) {
		return "unknown fault"
	}
	return faultNames[f]
}

// Request is what Options.Fault is told of a request.
type Request struct {
	Method, Path string
	// IdempotencyKey is the Idempotency-Key header, "" if none.
	IdempotencyKey string
	// Form is the parameters: a POST's body, or the query. It is a copy.
	Form url.Values
}

// fault chooses c's fault: Options.Fault's, or one drawn with FaultRates.
func (s *Server) fault(c *call) Fault {
	if s.opts.Fault != nil {
		return s.opts.Fault(Request{Method: c.r.Method, Path: c.r.URL.Path, IdempotencyKey: c.idempotencyKey,
			Form: cloneValues(c.form)})
	}
	if len(s.opts.FaultRates) == 0 {
		return FaultNone
	}
	s.mu.Lock()
	u := s.rng.Float64()
	s.mu.Unlock()
	for f := FaultNone + 1; int(f) < len(faultNames); f++ {
		if u -= s.opts.FaultRates[f]; u < 0 {
			return f
		}
	}
	return FaultNone
}

// cloneValues is a deep copy of v.
func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// bucket is the rate limit's token bucket: tokens left at the time at.
type bucket struct {
	tokens float64
	at     time.Time
}

// admit takes a token for a request received at now, and reports whether
// there was one: Options.RateLimit a second, a burst as large, at least one.
func (s *Server) admit(now time.Time) bool {
	rate := s.opts.RateLimit
	if rate == 0 {
		return true
	}
	burst := max(rate, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.bucket
	switch {
	case b.at.IsZero():
		b.tokens, b.at = burst, now
	case now.After(b.at):
		b.tokens, b.at = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate), now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
