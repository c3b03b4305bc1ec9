package idemcheck

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Usage is the command's synopsis, printed by -h before the flags.
const Usage = `usage: idemcheck -url URL -body JSON -auth CREDENTIAL -auth2 CREDENTIAL [flags]

Checks, from the outside, that a POST endpoint keeps the Idempotency-Key
contract, and prints a table of the checks, with the requests and answers
that broke each rule. Exits 1 when a check fails; a skipped check says why.
Every check creates resources with the credentials given: point it at a test
account. docs/IDEMCHECK.md explains each check and flag.

`

// Options is a parsed command line: the run's configuration and where to
// write the JSON report ("" for nowhere).
type Options struct {
	Config Config
	JSON   string
}

// ParseFlags parses the command line. -h prints the usage to output and
// returns flag.ErrHelp.
func ParseFlags(args []string, output io.Writer) (Options, error) {
	var o Options
	c := &o.Config
	fs := flag.NewFlagSet("idemcheck", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, Usage)
		fs.PrintDefaults()
	}
	var auth, auth2, dialect, only string
	fs.StringVar(&c.URL, "url", "", "the POST endpoint that creates something, e.g. http://localhost:8080/v1/payments")
	fs.StringVar(&c.Body, "body", "", "a JSON request body that creates something")
	fs.StringVar(&c.Body2, "body2", "", "another valid body, for a key reused with a different body (default: -body with its first number plus one)")
	fs.StringVar(&c.InvalidBody, "invalid-body", "{}", "a body the server refuses by validation")
	fs.StringVar(&auth, "auth", "", "the first caller's credentials: the Authorization value ('Bearer sk_test_acme'), or 'Name: value' for another header")
	fs.StringVar(&auth2, "auth2", "", "the second caller's credentials, as -auth, to check that keys are scoped per caller")
	fs.Var((*headerList)(&c.Headers), "header", "a header sent with every request, 'Name: value' (repeatable)")
	fs.StringVar(&dialect, "dialect", string(IETF), "ietf (quoted sf-string keys, 422 for another body) or stripe (bare keys, 400)")
	fs.IntVar(&c.Mismatch, "mismatch", 0, "the status of a key reused with a different body: 422 (IETF draft) or 400 (Stripe); default: the dialect's")
	keyRequired := fs.Bool("key-required", true, "the endpoint refuses a request without a key")
	fs.IntVar(&c.MaxKeyLength, "max-key-length", 255, "the longest key accepted (0: no limit, skip that check)")
	fs.StringVar(&c.ReplayedHeader, "replayed-header", "Idempotent-Replayed", "the header that marks a replay with \"true\" ('' if the server marks none)")
	fs.StringVar(&c.IDField, "id", "id", "the JSON member of an answer naming what it created (dotted for nested: payment.id); else its Location")
	fs.StringVar(&c.Get, "get", "", "a URL with {id} to GET a created resource, e.g. http://localhost:8080/v1/payments/{id}")
	fs.StringVar(&c.List, "list", "", "a URL listing the first caller's resources, newest first, to see what each check created")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "requests sent at once with one key")
	fs.DurationVar(&c.Retention, "retention", 0, "how long the server keeps a key (its published policy); without it, that check is skipped")
	fs.DurationVar(&c.RetentionGrace, "retention-grace", 0, "how long after -retention the server may take to expire a key (its reaper's interval)")
	fs.StringVar(&c.SlowBody, "slow-body", "", "a body the server takes long over, for a retry to arrive while it is in progress")
	fs.Var((*headerList)(&c.SlowHeaders), "slow-header", "a header that makes the first request slow, e.g. 'Prefer: wait=5' (repeatable)")
	fs.DurationVar(&c.SlowDelay, "slow-delay", 200*time.Millisecond, "how long after the slow request the first retry is sent")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "each request's timeout")
	fs.StringVar(&only, "run", "", "run only the checks whose names match this regular expression")
	fs.StringVar(&o.JSON, "json", "", "also write the report as JSON to this file, for CI")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q: every setting is a flag (-h lists them)", fs.Args())
	}
	c.Dialect, c.KeyOptional = Dialect(dialect), !*keyRequired
	var err error
	if c.Auth, err = credential(auth); err != nil {
		return o, fmt.Errorf("-auth: %w", err)
	}
	if c.Auth2, err = credential(auth2); err != nil {
		return o, fmt.Errorf("-auth2: %w", err)
	}
	if only != "" {
		if c.Only, err = regexp.Compile(only); err != nil {
			return o, fmt.Errorf("-run: %w", err)
		}
	}
	return o, nil
}

// credential is the header -auth gives: 'Name: value', or the value of
// Authorization.
func credential(s string) (Header, error) {
	if s == "" {
		return Header{}, fmt.Errorf("missing")
	}
	if name, value, ok := strings.Cut(s, ":"); ok && !strings.ContainsAny(name, " \t") && name != "" {
		return Header{name, strings.TrimSpace(value)}, nil
	}
	return Header{"Authorization", s}, nil
}

// headerList is a repeatable 'Name: value' flag.
type headerList []Header

func (h *headerList) String() string {
	parts := make([]string, len(*h))
	for i, x := range *h {
		parts[i] = x.Name + ": " + strconv.Quote(x.Value)
	}
	return strings.Join(parts, ", ")
}

func (h *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q is not 'Name: value'", s)
	}
	*h = append(*h, Header{strings.TrimSpace(name), strings.TrimSpace(value)})
	return nil
}
