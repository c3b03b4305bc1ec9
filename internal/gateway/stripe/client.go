package stripe

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/form"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/tracing"
)

// KeyRetention is how long Stripe keeps an idempotency key and the answer
// it gave: at least 24 hours, after which a request with the key is made
// anew.
const KeyRetention = 24 * time.Hour

// clockSkew is how far apart the database's clock and Stripe's may be, in
// the windows of creation times the lookups and the ledger list.
const (
	clockSkew        = 5 * time.Minute
	clockSkewSeconds = int64(clockSkew / time.Second)
)

// DefaultPageSize is how many objects a ledger page asks for when
// Config.PageSize is zero: Stripe's largest page.
const DefaultPageSize = 100

// maxPageSize is Stripe's largest page of a list or a search.
const maxPageSize = 100

// The metadata this adapter writes on what it creates.
const (
	metaDownstreamKey = "downstream_key"
	metaPaymentID     = "payment_id"
	metaFence         = "fence"
)

// Config is how to reach Stripe.
type Config struct {
	// APIKey is the secret (or restricted) key the calls are made with.
	APIKey string
	// APIBase is the API's URL; "" means Stripe's, https://api.stripe.com.
	APIBase string
	// Timeout bounds each HTTP request as a whole; zero means none but the
	// caller's context.
	Timeout time.Duration
	// PageSize is the limit of one ledger page, from 1 to 100; zero means
	// DefaultPageSize.
	PageSize int
	// Pace keeps the requests within the account's rate limit, across
	// every worker; nil means none.
	Pace *gateway.Pace
}

// Client makes the processor calls of every kind at Stripe. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	// api makes the calls stripe-go has a method for; backend the pages of
	// a list or a search (get).
	api     *stripego.Client
	backend stripego.Backend
}

// New returns a client of the Stripe API that cfg names.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.APIKey == "":
		return nil, errors.New("stripe: the API key is required")
	case cfg.PageSize < 0 || cfg.PageSize > maxPageSize:
		return nil, fmt.Errorf("stripe: page size %d is not between 1 and %d", cfg.PageSize, maxPageSize)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("stripe: negative timeout %s", cfg.Timeout)
	}
	if cfg.APIBase != "" {
		if u, err := url.Parse(cfg.APIBase); err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("stripe: API base %q is not an absolute URL", cfg.APIBase)
		}
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	return newClient(cfg, gateway.Client(cfg.Timeout, cfg.Pace)), nil
}

// newClient is the client of cfg making its requests with hc.
func newClient(cfg Config, hc *http.Client) *Client {
	base := cfg.APIBase
	if base == "" {
		base = stripego.APIURL
	}
	backend := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		HTTPClient: hc,
		URL:        stripego.String(base),
		// The worker retries under the same key and classifies every
		// answer: stripe-go's own retries would sleep inside a timed call
		// and turn a 409 or a 5xx into a later, different answer.
		MaxNetworkRetries: stripego.Int64(0),
		EnableTelemetry:   stripego.Bool(false),
		// Errors are returned, and logged by the caller with the
		// operation's context.
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	api := stripego.NewClient(cfg.APIKey, stripego.WithBackends(&stripego.Backends{
		API: backend, Connect: backend, Uploads: backend, MeterEvents: backend,
	}))
	return &Client{cfg: cfg, http: hc, api: api, backend: backend}
}

// Traced returns a copy of c whose every request is a client span, a child
// of the span in its context (package tracing). tp nil means the global
// provider.
func (c *Client) Traced(tp trace.TracerProvider) *Client {
	return newClient(c.cfg, &http.Client{Timeout: c.http.Timeout, Transport: tracing.Transport(c.http.Transport, tp)})
}

// get calls GET path with params in its query into page, as stripe-go's
// own lists do (its Call cannot encode list parameters), one page at a
// time: its iterators hide whether more pages follow.
func (c *Client) get(path string, params stripego.ParamsContainer, page stripego.LastResponseSetter) error {
	query := &form.Values{}
	form.AppendTo(query, params)
	return c.backend.CallRaw(http.MethodGet, path, c.cfg.APIKey, []byte(query.Encode()), params.GetParams(), page)
}

// APIError is an error answer of Stripe's: what it says happened, without
// the objects it may carry (a PaymentIntent's client_secret has no place in
// a log). It is returned wrapped in operation.ErrProcessorUnknown when it
// means that; errors.As finds it.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Type, Code, DeclineCode and Message are Stripe's error member.
	Type, Code, DeclineCode, Message string
	// RequestID is Stripe's Request-Id, for its dashboard's log.
	RequestID string
}

// Error names the status, type and code.
func (e *APIError) Error() string {
	return fmt.Sprintf("stripe answered %d %s/%s: %s (request %s)", e.Status, e.Type, e.Code, e.Message, e.RequestID)
}

// stripeError returns the Stripe error answer in err, if there is one.
func stripeError(err error) (*stripego.Error, bool) {
	var se *stripego.Error
	return se, errors.As(err, &se)
}

// unknown wraps err, an error of stripe-go's, in
// operation.ErrProcessorUnknown, a Stripe error answer as an *APIError; a
// 5xx Stripe replays for the key (savedFailure) in
// operation.ErrSavedFailure too, and a 429 in operation.ErrNotSent.
func unknown(err error) error {
	if errors.Is(err, operation.ErrProcessorUnknown) {
		return err
	}
	se, ok := stripeError(err)
	if !ok {
		return gateway.Unknown(err)
	}
	apiErr := &APIError{Status: se.HTTPStatusCode, Type: string(se.Type), Code: string(se.Code),
		DeclineCode: string(se.DeclineCode), Message: se.Msg, RequestID: se.RequestID}
	switch {
	case savedFailure(se):
		return gateway.SavedFailure(apiErr)
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		// Stripe's rate limit, or a lock on an object it could not take:
		// nothing was executed.
		var h http.Header
		if se.LastResponse != nil {
			h = se.LastResponse.Header
		}
		return gateway.TooManyRequests(apiErr, h)
	}
	return gateway.Unknown(apiErr)
}

// replayedHeader is the header Stripe marks an answer it replays for an
// idempotency key with: "true".
const replayedHeader = "Idempotent-Replayed"

// savedFailure reports whether se is a 5xx Stripe saved for the request's
// key and replays: it saves the first answer once the endpoint began
// executing, 500s included, and answers every request made again with the
// key with it until it forgets the key.
func savedFailure(se *stripego.Error) bool {
	return se.HTTPStatusCode >= http.StatusInternalServerError && se.LastResponse != nil &&
		se.LastResponse.Header.Get(replayedHeader) == "true"
}

// definite reports whether a Stripe error answer is a definite refusal: an
// invalid_request_error with a 4xx that is not a configuration to fix (401,
// 403), a request that timed out (408), a key in use (409) or a rate limit
// (429). Stripe does not store the answer of a request that failed
// validation, and a retry with the same parameters is refused again.
func definite(se *stripego.Error) bool {
	switch s := se.HTTPStatusCode; {
	case s < 400 || s >= 500, s == http.StatusUnauthorized, s == http.StatusForbidden,
		s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests:
		return false
	}
	return se.Type == stripego.ErrorTypeInvalidRequest
}

// keyUsed reports whether err is Stripe's refusal of a key used before
// with other parameters or on another endpoint: a 400 idempotency_error.
// A 409 is a request with the key still in flight, and says nothing yet.
func keyUsed(err error) bool {
	se, ok := stripeError(err)
	return ok && se.Type == stripego.ErrorTypeIdempotency && se.HTTPStatusCode == http.StatusBadRequest
}

// refusal classifies the error of a create that made nothing known: a
// definite refusal is an Outcome with no ID, anything else unknown.
func refusal(err error) (operation.Outcome, error) {
	se, ok := stripeError(err)
	if !ok || !definite(se) {
		return operation.Outcome{}, unknown(err)
	}
	return operation.Outcome{FailureCode: firstOf(string(se.Code), string(se.Type)), FailureMessage: se.Msg}, nil
}

// firstOf is the first of codes that is not empty.
func firstOf(codes ...string) string {
	for _, c := range codes {
		if c != "" {
			return c
		}
	}
	return ""
}
