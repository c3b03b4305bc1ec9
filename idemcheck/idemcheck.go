// Package idemcheck checks, from the outside, that an HTTP API keeps the
// Idempotency-Key contract: the key's syntax, replays byte for byte, a key
// reused with another body refused, concurrent duplicates executed once, keys
// scoped per caller, validation errors not stored, the in-progress answer and
// expiry. Each check is declared once, in checks, with the rule it comes from:
// a section of the IETF draft (draft-ietf-httpapi-idempotency-key-header) or
// Stripe's documented behaviour. It knows nothing of the payments service: it
// is pointed at a URL, a body and two callers' credentials.
package idemcheck

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// Dialect names the rules a server follows where the IETF draft and Stripe
// differ: the status of a key reused with another body (422 or 400), the key's
// form (an sf-string, quoted, or any string) and the citations.
type Dialect string

// The dialects.
const (
	IETF   Dialect = "ietf"
	Stripe Dialect = "stripe"
)

// Header is one request header field.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Config is what the checks are run against and how.
type Config struct {
	URL         string   // the POST endpoint that creates something
	Body        string   // a request body that creates something
	Body2       string   // another valid body, for the reused-key check; "" derives one from Body
	InvalidBody string   // a body the server refuses by validation
	Auth, Auth2 Header   // the credentials of the two callers
	Headers     []Header // sent with every request

	Dialect        Dialect
	Mismatch       int    // the status of a key reused with another body; 0: the dialect's
	KeyOptional    bool   // a request without a key is not refused
	MaxKeyLength   int    // the longest key accepted; 0 skips the too-long check
	ReplayedHeader string // marks a replay with "true"; "" if the server marks none
	IDField        string // the JSON member of an answer that names what it created
	Get            string // a URL with {id}: GET it to see the resource exists
	List           string // a URL that lists the resources: before and after, to see what was created

	Concurrency    int            // requests sent at once with one key
	Retention      time.Duration  // how long the server keeps a key; 0 skips the check
	RetentionGrace time.Duration  // how long after Retention the server may take to expire a key
	SlowBody       string         // a body the server takes long over; "" uses Body
	SlowHeaders    []Header       // headers that make a request slow (Prefer: wait=5)
	SlowDelay      time.Duration  // how long after the slow request the first retry is sent
	Timeout        time.Duration  // each request's
	Only           *regexp.Regexp // the checks to run, by name; nil runs all

	// Client sends the requests; nil uses one of its own.
	Client *http.Client
}

// Status is a check's outcome.
type Status string

// The outcomes. A skipped check is not a pass: it says why it did not run.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Skipped Status = "skipped"
)

// Result is one check's outcome, with the exchanges that broke the rule.
type Result struct {
	Name     string      `json:"name"`
	Cites    string      `json:"cites"` // the rule's source, in short
	Rule     string      `json:"rule"`
	Status   Status      `json:"status"`
	Detail   string      `json:"detail,omitempty"`
	Evidence []*Exchange `json:"evidence,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	URL     string    `json:"url"`
	Dialect Dialect   `json:"dialect"`
	Started time.Time `json:"started"`
	Results []Result  `json:"checks"`
	Passed  int       `json:"passed"`
	Failed  int       `json:"failed"`
	Skipped int       `json:"skipped"`
}

// Err is nil when no check failed, and otherwise says how many did.
func (r *Report) Err() error {
	if r.Failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d checks failed", r.Failed, len(r.Results))
}

// Run runs every check (those Only matches, when set), one after another, and
// reports each. The error is for a run that could not start; failed checks are
// in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Body2 == "" {
		var err error
		if cfg.Body2, err = deriveBody(cfg.Body); err != nil {
			return nil, err
		}
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: cfg.Concurrency + 2,
		}}
		defer client.CloseIdleConnections()
	}
	rep := &Report{URL: cfg.URL, Dialect: cfg.Dialect, Started: time.Now().UTC()}
	run := newRunID()
	for _, c := range checks {
		if cfg.Only != nil && !cfg.Only.MatchString(c.name) {
			continue
		}
		p := &probe{cfg: &cfg, client: client, run: run, check: c.name, start: time.Now()}
		v := c.run(ctx, p)
		res := Result{Name: c.name, Cites: c.cites, Rule: c.rule, Status: v.status, Detail: v.detail}
		switch v.status {
		case Pass:
			rep.Passed++
		case Fail:
			rep.Failed++
			res.Evidence = p.log
		case Skipped:
			rep.Skipped++
		default:
			return nil, fmt.Errorf("check %s: unknown status %q", c.name, v.status)
		}
		rep.Results = append(rep.Results, res)
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("stopped after %s: %w", c.name, err)
		}
	}
	if len(rep.Results) == 0 {
		return nil, fmt.Errorf("no check's name matches %q", cfg.Only)
	}
	return rep, nil
}

// defaults fills what was left zero.
func (c *Config) defaults() {
	if c.Dialect == "" {
		c.Dialect = IETF
	}
	if c.Mismatch == 0 {
		c.Mismatch = http.StatusUnprocessableEntity
		if c.Dialect == Stripe {
			c.Mismatch = http.StatusBadRequest
		}
	}
	if c.IDField == "" {
		c.IDField = "id"
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.SlowDelay == 0 {
		c.SlowDelay = 200 * time.Millisecond
	}
	if c.InvalidBody == "" {
		c.InvalidBody = "{}"
	}
}

// validate refuses a configuration the checks cannot run with.
func (c *Config) validate() error {
	switch {
	case c.URL == "":
		return fmt.Errorf("no URL: give the POST endpoint that creates something (-url)")
	case c.Body == "":
		return fmt.Errorf("no body: give a request body that creates something (-body)")
	case c.Auth.Name == "" || c.Auth2.Name == "":
		return fmt.Errorf("two callers are needed, to check that keys are scoped per caller (-auth and -auth2)")
	case c.Dialect != IETF && c.Dialect != Stripe:
		return fmt.Errorf("unknown dialect %q: ietf or stripe", c.Dialect)
	case c.Concurrency < 2:
		return fmt.Errorf("concurrency %d: at least 2 requests must race", c.Concurrency)
	case c.Body2 != "" && c.Body2 == c.Body:
		return fmt.Errorf("-body2 is the same as -body: it must differ")
	}
	return nil
}
