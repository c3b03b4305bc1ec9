package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// UserAgent is the User-Agent header of every request.
const UserAgent = "payments-go-client"

// Defaults of a new Client.
const (
	DefaultMaxAttempts = 5
	DefaultBackoffBase = 200 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
	// DefaultTimeout bounds one attempt of the default HTTP client, so a
	// connection that hangs is abandoned and retried with the same key.
	DefaultTimeout = 60 * time.Second
)

// maxBody bounds how much of a response body is read: a full page of
// payments with metadata fits many times over.
const maxBody = 8 << 20

// Client calls the payments API. It is safe for concurrent use.
type Client struct {
	baseURL     string
	apiKey      string
	httpClient  *http.Client
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	sleep       func(ctx context.Context, d time.Duration) error
	wait        int // seconds for Prefer: wait; negative sends no Prefer

	// jitter draws a wait from [0, ceiling); tests replace it to make
	// backoff exact.
	jitter func(ceiling time.Duration) time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc, for example to
// set TLS, a proxy or a different per-attempt timeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.httpClient = hc
		}
	}
}

// WithMaxAttempts sets how many times one call is tried in all, the first
// try included; n below 1 means 1.
func WithMaxAttempts(n int) Option {
	return func(c *Client) { c.maxAttempts = max(1, n) }
}

// WithBackoff sets the backoff used when the server sends no Retry-After: the
// wait before retry n is drawn at random from zero up to base·2ⁿ⁻¹, capped at
// maxDelay (exponential backoff with full jitter).
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *Client) {
		c.backoffBase = base
		c.backoffMax = maxDelay
	}
}

// WithSleep replaces how the Client waits between attempts. sleep must return
// early with ctx's error when ctx is done. Tests use it to record the waits
// instead of sleeping.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) {
		if sleep != nil {
			c.sleep = sleep
		}
	}
}

// WithWait asks the server to wait up to seconds for a POST to finish before
// it answers 202, by sending Prefer: wait=seconds. Zero asks for an immediate
// answer; without this option the server's default applies.
func WithWait(seconds int) Option {
	return func(c *Client) { c.wait = seconds }
}

// New returns a Client of the API at baseURL, such as
// "http://localhost:8080", that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		baseURL:     strings.TrimRight(baseURL, "/"),
		apiKey:      apiKey,
		httpClient:  &http.Client{Timeout: DefaultTimeout},
		maxAttempts: DefaultMaxAttempts,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
		sleep:       sleepCtx,
		wait:        -1,
		jitter:      rand.N[time.Duration],
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Response describes the HTTP answer a call ended with.
type Response struct {
	// StatusCode is the HTTP status of the last answer; 0 when no answer
	// came at all, and 202 when the call ran out of attempts while the
	// operation was still processing (or, for a resend or a recovery of
	// webhook deliveries, when the server started it: their final answer).
	StatusCode int
	// Replayed reports whether the answer was stored by an earlier request
	// with the same key (Idempotent-Replayed: true).
	Replayed bool
	// IdempotencyKey is the key every attempt carried, generated when the
	// caller gave none. Calling again with it is always safe.
	IdempotencyKey string
	// Location is the URL path of the resource, when the answer names one.
	Location string
	// RequestID is the server's X-Request-Id of the answer, for support.
	RequestID string
	// Attempts is how many requests the call sent.
	Attempts int
}

// reply is one HTTP answer, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// send performs one call: it tries the request until the answer is final or
// maxAttempts is reached, with the same key every time, and decodes a 2xx
// body as T. A 202 is not final: it is retried, and when the attempts run
// out the last 202 body is returned with a nil error.
func send[T any](ctx context.Context, c *Client, method, path, key string, body []byte) (*T, *Response, error) {
	return sendCall[T](ctx, c, method, path, key, body, false)
}

// start is send for a request that starts work the server goes on with in
// the background, such as a resend: its 202 is the final answer, stored on
// the key like any other, so it is returned at once instead of retried.
func start[T any](ctx context.Context, c *Client, method, path, key string, body []byte) (*T, *Response, error) {
	return sendCall[T](ctx, c, method, path, key, body, true)
}

// fetch sends a request without a body or a key, such as a GET, and returns
// the answer decoded as T: what every get, list and delete does.
func fetch[T any](ctx context.Context, c *Client, method, path string) (*T, error) {
	v, _, err := send[T](ctx, c, method, path, "", nil)
	return v, err
}

// fetchID is fetch on path, of the resource id or below it: an empty id is
// refused at once, what naming the call in the error.
func fetchID[T any](ctx context.Context, c *Client, method, what, id, path string) (*T, error) {
	if id == "" {
		return nil, errors.New(what + ": empty id")
	}
	return fetch[T](ctx, c, method, path)
}

// post encodes params and POSTs them to path with sender (send, or start),
// under idempotencyKey or a key generated once for the call; what names the
// call in an encoding error.
func post[T any](ctx context.Context, c *Client,
	sender func(ctx context.Context, c *Client, method, path, key string, body []byte) (*T, *Response, error),
	what, idempotencyKey, path string, params any,
) (*T, *Response, error) {
	idempotencyKey = keyOrNew(idempotencyKey)
	body, err := json.Marshal(params)
	if err != nil {
		return nil, &Response{IdempotencyKey: idempotencyKey}, fmt.Errorf("%s: encode: %w", what, err)
	}
	return sender(ctx, c, http.MethodPost, path, idempotencyKey, body)
}

// postID is post to path, of the resource id or below it: an empty id is
// refused at once, with the key the call would have used.
func postID[T any](ctx context.Context, c *Client,
	sender func(ctx context.Context, c *Client, method, path, key string, body []byte) (*T, *Response, error),
	what, idempotencyKey, id, path string, params any,
) (*T, *Response, error) {
	if id == "" {
		return nil, &Response{IdempotencyKey: keyOrNew(idempotencyKey)}, errors.New(what + ": empty id")
	}
	return post(ctx, c, sender, what, idempotencyKey, path, params)
}

// keyOrNew is key, or a new key when it is "".
func keyOrNew(key string) string {
	if key == "" {
		return NewIdempotencyKey()
	}
	return key
}

// sendCall is send, with final202 telling whether a 202 is final.
func sendCall[T any](ctx context.Context, c *Client, method, path, key string, body []byte, final202 bool) (*T, *Response, error) {
	op := method + " " + path
	resp := &Response{IdempotencyKey: key}
	target := c.baseURL + path
	// A wrong base URL fails every attempt alike: say so at once.
	if u, err := url.Parse(target); err != nil {
		return nil, resp, fmt.Errorf("%s: %w", op, err)
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, resp, fmt.Errorf("%s: base URL %q is not an http or https URL", op, c.baseURL)
	}
	var (
		accepted     *T // the resource as the last 202 showed it
		acceptedResp Response
		lastErr      error
	)
	// last is the Response to return when the call stops unfinished: the
	// last 202 when there was one, since the operation is known to run.
	last := func() *Response {
		if accepted == nil {
			return resp
		}
		acceptedResp.Attempts = resp.Attempts
		return &acceptedResp
	}
	for attempt := 1; ; attempt++ {
		resp.Attempts = attempt
		r, err := c.try(ctx, method, target, key, body)
		var (
			retryAfter    time.Duration
			hasRetryAfter bool
		)
		switch {
		case err != nil && ctx.Err() != nil:
			return accepted, last(), fmt.Errorf("%s: %w", op, err)
		case err != nil:
			// No answer, or a cut-off one: the request may or may not have
			// run, which the same key makes safe to find out by retrying.
			lastErr = fmt.Errorf("%s: %w", op, err)
		default:
			resp.fill(r)
			switch {
			case r.status == http.StatusAccepted && !final202:
				v, err := decode[T](r.body)
				if err != nil {
					return nil, resp, fmt.Errorf("%s: %w", op, err)
				}
				accepted, acceptedResp, lastErr = v, *resp, nil
				retryAfter, hasRetryAfter = parseRetryAfter(r.header.Get("Retry-After"))
			case r.status >= 200 && r.status < 300:
				v, err := decode[T](r.body)
				if err != nil {
					return nil, resp, fmt.Errorf("%s: %w", op, err)
				}
				return v, resp, nil
			default:
				apiErr := newError(r)
				if !apiErr.Retryable() {
					return nil, resp, apiErr
				}
				lastErr = apiErr
				retryAfter, hasRetryAfter = parseRetryAfter(r.header.Get("Retry-After"))
			}
		}
		if attempt >= c.maxAttempts {
			break
		}
		if !hasRetryAfter {
			retryAfter = c.backoff(attempt)
		}
		if err := c.sleep(ctx, retryAfter); err != nil {
			return accepted, last(), fmt.Errorf("%s: wait to retry: %w", op, err)
		}
	}
	if accepted != nil {
		// The operation was accepted and is running; it is not an error
		// that it has not finished yet.
		return accepted, last(), nil
	}
	return nil, resp, fmt.Errorf("%s: gave up after %d attempts: %w", op, resp.Attempts, lastErr)
}

// try sends one request and reads its answer in full, so that a connection
// dropped in the middle of the body counts as no answer.
func (c *Client) try(ctx context.Context, method, target, key string, body []byte) (*reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		if c.wait >= 0 {
			req.Header.Set("Prefer", "wait="+strconv.Itoa(c.wait))
		}
	}
	res, err := c.httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	return &reply{status: res.StatusCode, header: res.Header, body: b}, nil
}

// fill records the answer r on the Response.
func (resp *Response) fill(r *reply) {
	resp.StatusCode = r.status
	resp.Replayed = strings.EqualFold(r.header.Get("Idempotent-Replayed"), "true")
	resp.Location = r.header.Get("Location")
	resp.RequestID = r.header.Get("X-Request-Id")
}

func decode[T any](body []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return v, nil
}

// listPath is path with the query of a list: limit when above 0,
// starting_after and each filter (name, value pairs) when not "".
func listPath(path string, limit int, startingAfter string, filters ...string) string {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if startingAfter != "" {
		q.Set("starting_after", startingAfter)
	}
	for i := 0; i+1 < len(filters); i += 2 {
		if filters[i+1] != "" {
			q.Set(filters[i], filters[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
