package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// endpointJSON is a webhook endpoint as the server encodes it; secret, when
// not "", is shown.
func endpointJSON(status, secret string) string {
	reason, shown := "null", ""
	if status == EndpointDisabled {
		reason = `"by_tenant"`
	}
	if secret != "" {
		shown = `,"secret":"` + secret + `"`
	}
	return `{"id":"we_123","object":"webhook_endpoint","url":"https://merchant.example/hooks",` +
		`"enabled_events":["payment.succeeded"],"description":null,"status":"` + status + `","disabled_reason":` + reason + `,` +
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"` + shown + `}`
}

// deliveryJSON is a delivery as the server encodes it.
const deliveryJSON = `{"id":"whd_7","object":"webhook_delivery","endpoint":"we_123","event":"evt_123",` +
	`"status":"pending","attempts":0,"created_at":"2026-01-02T03:04:05Z","delivered_at":null}`

// recoveryJSON is a recovery as the server encodes it.
const recoveryJSON = `{"object":"webhook_recovery","endpoint":"we_123","since":"2026-01-02T00:00:00Z","resent":3,"has_more":true}`

func TestCreateWebhookEndpoint(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	params := CreateWebhookEndpointParams{URL: "https://merchant.example/hooks", EnabledEvents: []string{EventPaymentSucceeded}}

	tests := []struct {
		name         string
		steps        []step
		wantSecret   string
		wantCode     string
		wantReplayed bool
		wantRequests int
	}{
		{
			name:       "OK",
			steps:      []step{respond(http.StatusCreated, endpointJSON(EndpointEnabled, secret), "Location", "/v1/webhook_endpoints/we_123")},
			wantSecret: secret, wantRequests: 1,
		},
		{
			name:         "ReplayedWithoutSecret",
			steps:        []step{respond(http.StatusCreated, endpointJSON(EndpointEnabled, ""), "Idempotent-Replayed", "true")},
			wantReplayed: true, wantRequests: 1,
		},
		{
			name: "KeyInUseThenCreated",
			steps: []step{
				respond(http.StatusConflict, problemJSON(http.StatusConflict, CodeIdempotencyKeyInUse, "held"), "Retry-After", "1"),
				respond(http.StatusCreated, endpointJSON(EndpointEnabled, secret)),
			},
			wantSecret: secret, wantRequests: 2,
		},
		{
			name:     "ErrEndpointLimitReached",
			steps:    []step{respond(http.StatusBadRequest, problemJSON(http.StatusBadRequest, CodeEndpointLimitReached, "delete one first"))},
			wantCode: CodeEndpointLimitReached, wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.steps...)
			c, _ := newTestClient(t, f)

			e, resp, err := c.CreateWebhookEndpoint(context.Background(), "", params)

			if tt.wantCode != "" {
				if apiErr, ok := errors.AsType[*Error](err); !ok || apiErr.Code != tt.wantCode || apiErr.Retryable() {
					t.Errorf("err = %v, want a final *Error %s", err, tt.wantCode)
				}
			} else if err != nil || e.ID != "we_123" || e.Secret != tt.wantSecret || resp.Replayed != tt.wantReplayed {
				t.Errorf("got %+v, %+v, %v; want we_123 with secret %q, replayed %v", e, resp, err, tt.wantSecret, tt.wantReplayed)
			}
			reqs := f.requests()
			checkAttempts(t, reqs, resp, "/v1/webhook_endpoints", "", tt.wantRequests)
			if want := `{"url":"https://merchant.example/hooks","enabled_events":["payment.succeeded"]}`; reqs[0].Body != want {
				t.Errorf("body = %s, want %s", reqs[0].Body, want)
			}
		})
	}
}

// TestWebhookRequests checks the method, path, query, body and key of each
// call of webhook endpoints, deliveries and events.
func TestWebhookRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	desc, zero, hour := "", time.Duration(0), time.Hour
	since := time.Date(2026, 1, 2, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	// rotate is the call of a rotation of we_123's secret with p.
	rotate := func(p RotateSecretParams) func(c *Client) error {
		return func(c *Client) error {
			_, _, err := c.RotateWebhookEndpointSecret(ctx, "k", "we_123", p)
			return err
		}
	}
	rotated := respond(http.StatusOK, endpointJSON(EndpointEnabled, "whsec_new"))

	tests := []struct {
		name     string
		answer   step
		call     func(c *Client) error
		wantReq  string // method, path and query
		wantBody string
		wantKey  bool
	}{
		{
			name:    "GetWebhookEndpoint",
			answer:  respond(http.StatusOK, endpointJSON(EndpointEnabled, "")),
			call:    func(c *Client) error { _, err := c.GetWebhookEndpoint(ctx, "we_123"); return err },
			wantReq: "GET /v1/webhook_endpoints/we_123",
		},
		{
			name:   "ListWebhookEndpoints",
			answer: respond(http.StatusOK, `{"object":"list","data":[`+endpointJSON(EndpointEnabled, "")+`],"has_more":false}`),
			call: func(c *Client) error {
				l, err := c.ListWebhookEndpoints(ctx, 5, "we_9")
				if err == nil && (len(l.Data) != 1 || l.Data[0].ID != "we_123") {
					t.Errorf("list = %+v", l)
				}
				return err
			},
			wantReq: "GET /v1/webhook_endpoints?limit=5&starting_after=we_9",
		},
		{
			name:   "UpdateWebhookEndpoint",
			answer: respond(http.StatusOK, endpointJSON(EndpointDisabled, "")),
			call: func(c *Client) error {
				e, _, err := c.UpdateWebhookEndpoint(ctx, "k", "we_123", UpdateWebhookEndpointParams{Status: EndpointDisabled, Description: &desc})
				if err == nil && (e.Status != EndpointDisabled || e.DisabledReason == nil || *e.DisabledReason != "by_tenant") {
					t.Errorf("endpoint = %+v", e)
				}
				return err
			},
			wantReq: "POST /v1/webhook_endpoints/we_123", wantBody: `{"description":"","status":"disabled"}`, wantKey: true,
		},
		{
			name:   "DeleteWebhookEndpoint",
			answer: respond(http.StatusOK, `{"id":"we_123","object":"webhook_endpoint","deleted":true}`),
			call: func(c *Client) error {
				d, err := c.DeleteWebhookEndpoint(ctx, "we_123")
				checkDeleted(t, d, err)
				return err
			},
			wantReq: "DELETE /v1/webhook_endpoints/we_123",
		},
		{
			name: "RotateDefaultGrace", answer: rotated, call: rotate(RotateSecretParams{}),
			wantReq: "POST /v1/webhook_endpoints/we_123/rotate_secret", wantBody: `{}`, wantKey: true,
		},
		{
			name: "RotateAtOnce", answer: rotated, call: rotate(RotateSecretParams{ExpireCurrentSecretIn: &zero}),
			wantReq: "POST /v1/webhook_endpoints/we_123/rotate_secret", wantBody: `{"expire_current_secret_in":0}`, wantKey: true,
		},
		{
			name: "RotateInAnHour", answer: rotated, call: rotate(RotateSecretParams{ExpireCurrentSecretIn: &hour}),
			wantReq: "POST /v1/webhook_endpoints/we_123/rotate_secret", wantBody: `{"expire_current_secret_in":3600}`, wantKey: true,
		},
		{
			// A resend's 202 is its final answer: not retried.
			name:   "ResendWebhookEvent",
			answer: respond(http.StatusAccepted, deliveryJSON, "Location", "/v1/webhook_endpoints/we_123/deliveries"),
			call: func(c *Client) error {
				d, resp, err := c.ResendWebhookEvent(ctx, "k", "we_123", "evt_123")
				if err == nil && (d.ID != "whd_7" || d.Status != DeliveryPending || d.Event != "evt_123" || resp.Location == "") {
					t.Errorf("delivery = %+v, resp = %+v", d, resp)
				}
				return err
			},
			wantReq: "POST /v1/webhook_endpoints/we_123/resend", wantBody: `{"event":"evt_123"}`, wantKey: true,
		},
		{
			name:   "RecoverWebhookDeliveries",
			answer: respond(http.StatusAccepted, recoveryJSON),
			call: func(c *Client) error {
				r, _, err := c.RecoverWebhookDeliveries(ctx, "k", "we_123", since)
				if err == nil && (r.Object != "webhook_recovery" || r.Endpoint != "we_123" || r.Resent != 3 || !r.HasMore || !r.Since.Equal(since)) {
					t.Errorf("recovery = %+v", r)
				}
				return err
			},
			wantReq: "POST /v1/webhook_endpoints/we_123/recover", wantBody: `{"since":"2026-01-02T00:00:00Z"}`, wantKey: true,
		},
		{
			name:   "ListWebhookDeliveryAttempts",
			answer: respond(http.StatusOK, `{"object":"list","data":[],"has_more":false}`),
			call: func(c *Client) error {
				_, err := c.ListWebhookDeliveryAttempts(ctx, "we_123", ListDeliveryAttemptsParams{})
				return err
			},
			wantReq: "GET /v1/webhook_endpoints/we_123/deliveries",
		},
		{
			name:   "ListWebhookDeliveryAttemptsFiltered",
			answer: respond(http.StatusOK, `{"object":"list","data":[],"has_more":false}`),
			call: func(c *Client) error {
				_, err := c.ListWebhookDeliveryAttempts(ctx, "we_123", ListDeliveryAttemptsParams{
					Limit: 100, StartingAfter: "wha_9", Status: AttemptFailed, Type: EventRefundSucceeded,
				})
				return err
			},
			wantReq: "GET /v1/webhook_endpoints/we_123/deliveries?limit=100&starting_after=wha_9&status=failed&type=refund.succeeded",
		},
		{
			name:    "GetEvent",
			answer:  respond(http.StatusOK, eventJSON),
			call:    func(c *Client) error { _, err := c.GetEvent(ctx, "evt_123"); return err },
			wantReq: "GET /v1/events/evt_123",
		},
		{
			name:    "ListEvents",
			answer:  respond(http.StatusOK, `{"object":"list","data":[`+eventJSON+`],"has_more":true}`),
			call:    func(c *Client) error { _, err := c.ListEvents(ctx, 2, ""); return err },
			wantReq: "GET /v1/events?limit=2",
		},
		{
			name:   "ListEventDeliveries",
			answer: respond(http.StatusOK, `{"object":"list","data":[`+deliveryJSON+`],"has_more":false}`),
			call: func(c *Client) error {
				l, err := c.ListEventDeliveries(ctx, "evt_123", 0, "")
				if err == nil && (len(l.Data) != 1 || l.Data[0].Endpoint != "we_123") {
					t.Errorf("list = %+v", l)
				}
				return err
			},
			wantReq: "GET /v1/events/evt_123/deliveries",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.answer)
			c, s := newTestClient(t, f)
			if err := tt.call(c); err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 1 || len(s.all()) != 0 {
				t.Fatalf("requests = %d after %d waits, want one at once", len(reqs), len(s.all()))
			}
			r := reqs[0]
			got := r.Method + " " + r.Path
			if r.Query != "" {
				got += "?" + r.Query
			}
			if got != tt.wantReq || r.Body != tt.wantBody {
				t.Errorf("request = %s %s, want %s %s", got, r.Body, tt.wantReq, tt.wantBody)
			}
			if key := r.Header.Get("Idempotency-Key"); (key != "") != tt.wantKey {
				t.Errorf("Idempotency-Key = %q, want one: %v", key, tt.wantKey)
			}
		})
	}
}

func checkDeleted(t *testing.T, d *DeletedWebhookEndpoint, err error) {
	t.Helper()
	if err == nil && (d.ID != "we_123" || !d.Deleted) {
		t.Errorf("deleted = %+v", d)
	}
}

// TestStartedIsFinal: a resend or a recovery answers 202 once, with what it
// started; the call returns it at once, and still retries what may change.
func TestStartedIsFinal(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t,
		respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, CodeServiceUnavailable, "db down"), "Retry-After", "1"),
		respond(http.StatusAccepted, recoveryJSON, "Idempotent-Replayed", "true"),
		respond(http.StatusInternalServerError, problemJSON(http.StatusInternalServerError, "internal_error", "not asked")),
	)
	c, s := newTestClient(t, f)

	r, resp, err := c.RecoverWebhookDeliveries(context.Background(), "", "we_123", time.Now())
	if err != nil || r.Resent != 3 || resp.StatusCode != http.StatusAccepted || !resp.Replayed || resp.Attempts != 2 {
		t.Fatalf("got %+v, %+v, %v; want the 202 after 2 attempts", r, resp, err)
	}
	checkAttempts(t, f.requests(), resp, "/v1/webhook_endpoints/we_123/recover", "", 2)
	if got := s.all(); len(got) != 1 || got[0] != time.Second {
		t.Errorf("sleeps = %v, want Retry-After's 1s only", got)
	}
}

// TestWebhookRefusals: the webhook answers that cannot change come back at
// once as *Error.
func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name   string
		status int
		code   string
		call   func(c *Client) error
	}{
		{
			name: "DeliveryInFlight", status: http.StatusConflict, code: CodeDeliveryInFlight,
			call: func(c *Client) error { _, _, err := c.ResendWebhookEvent(ctx, "", "we_123", "evt_123"); return err },
		},
		{
			name: "EndpointDisabled", status: http.StatusConflict, code: CodeEndpointDisabled,
			call: func(c *Client) error { _, _, err := c.ResendWebhookEvent(ctx, "", "we_123", "evt_123"); return err },
		},
		{
			name: "RotationInProgress", status: http.StatusConflict, code: CodeRotationInProgress,
			call: func(c *Client) error {
				_, _, err := c.RotateWebhookEndpointSecret(ctx, "", "we_123", RotateSecretParams{})
				return err
			},
		},
		{
			name: "NotFound", status: http.StatusNotFound, code: CodeNotFound,
			call: func(c *Client) error { _, err := c.DeleteWebhookEndpoint(ctx, "we_123"); return err },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, respond(tt.status, problemJSON(tt.status, tt.code, "refused")))
			c, _ := newTestClient(t, f)
			err := tt.call(c)
			if apiErr, ok := errors.AsType[*Error](err); !ok || apiErr.Code != tt.code || apiErr.Status != tt.status {
				t.Errorf("err = %v, want *Error %d %s", err, tt.status, tt.code)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

func TestWebhookEmptyIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeAPI(t, respond(http.StatusOK, `{}`))
	c, _ := newTestClient(t, f)
	calls := map[string]func() (*Response, error){
		"GetWebhookEndpoint":    func() (*Response, error) { _, err := c.GetWebhookEndpoint(ctx, ""); return nil, err },
		"DeleteWebhookEndpoint": func() (*Response, error) { _, err := c.DeleteWebhookEndpoint(ctx, ""); return nil, err },
		"UpdateWebhookEndpoint": func() (*Response, error) {
			_, resp, err := c.UpdateWebhookEndpoint(ctx, "k", "", UpdateWebhookEndpointParams{})
			return resp, err
		},
		"RotateWebhookEndpointSecret": func() (*Response, error) {
			_, resp, err := c.RotateWebhookEndpointSecret(ctx, "k", "", RotateSecretParams{})
			return resp, err
		},
		"ResendNoEndpoint": func() (*Response, error) {
			_, resp, err := c.ResendWebhookEvent(ctx, "k", "", "evt_1")
			return resp, err
		},
		"ResendNoEvent": func() (*Response, error) {
			_, resp, err := c.ResendWebhookEvent(ctx, "k", "we_1", "")
			return resp, err
		},
		"RecoverWebhookDeliveries": func() (*Response, error) {
			_, resp, err := c.RecoverWebhookDeliveries(ctx, "k", "", time.Now())
			return resp, err
		},
		"ListWebhookDeliveryAttempts": func() (*Response, error) {
			_, err := c.ListWebhookDeliveryAttempts(ctx, "", ListDeliveryAttemptsParams{})
			return nil, err
		},
		"GetEvent":            func() (*Response, error) { _, err := c.GetEvent(ctx, ""); return nil, err },
		"ListEventDeliveries": func() (*Response, error) { _, err := c.ListEventDeliveries(ctx, "", 0, ""); return nil, err },
	}
	for name, call := range calls {
		resp, err := call()
		if err == nil {
			t.Errorf("%s: nil error, want one", name)
		}
		if resp != nil && resp.IdempotencyKey != "k" {
			t.Errorf("%s: resp = %+v, want the key", name, resp)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("requests = %d, want none", n)
	}
}
