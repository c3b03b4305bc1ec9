package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/client"
	"github.com/example/payments/tools/stacktest"
)

// These tests run the client against the real service, started in the test
// process by package stacktest on a database of its own.

var visa = client.CreatePaymentParams{Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_visa"}

// newStack starts the service with its worker, and returns a Client of its
// API for the acme tenant.
func newStack(t *testing.T) (*stacktest.Stack, *client.Client) {
	t.Helper()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	hc := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return s, client.New(s.API.URL, stacktest.Acme, client.WithHTTPClient(hc), client.WithWait(10))
}

// delivery is a request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a merchant's webhook receiver on loopback: it verifies each
// delivery with client.Webhook, and answers 500 to the first failFirst, and
// to every one while failing is set.
type receiver struct {
	srv       *httptest.Server
	webhook   atomic.Pointer[client.Webhook]
	failFirst int64
	failing   atomic.Bool
	hits      atomic.Int64

	mu       sync.Mutex
	verified []delivery
	refused  []error
}

func newReceiver(t *testing.T, failFirst int64) *receiver {
	t.Helper()
	rc := &receiver{failFirst: failFirst}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if n := rc.hits.Add(1); n <= rc.failFirst || rc.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		wh := rc.webhook.Load()
		if wh == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		err = wh.Verify(r.Header, body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			rc.refused = append(rc.refused, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.verified = append(rc.verified, delivery{header: r.Header.Clone(), body: body})
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// deliveries returns the deliveries verified so far, and the errors of
// those refused.
func (rc *receiver) deliveries() ([]delivery, []error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.verified), slices.Clone(rc.refused)
}

// waitVerified waits until the receiver has verified n deliveries, and
// fails if it refused one.
func (rc *receiver) waitVerified(t *testing.T, n int) []delivery {
	t.Helper()
	stacktest.WaitFor(t, "verified deliveries", func() bool {
		got, _ := rc.deliveries()
		return len(got) >= n
	})
	got, refused := rc.deliveries()
	if len(refused) > 0 {
		t.Fatalf("the receiver refused deliveries: %v", refused)
	}
	return got
}

// register registers rc's URL for events with the client, and makes rc
// verify with the endpoint's secret.
func register(t *testing.T, c *client.Client, rc *receiver, events ...string) *client.WebhookEndpoint {
	t.Helper()
	e, _, err := c.CreateWebhookEndpoint(context.Background(), "", client.CreateWebhookEndpointParams{URL: rc.srv.URL + "/hooks", EnabledEvents: events})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	wh, err := client.NewWebhook(e.Secret)
	if err != nil {
		t.Fatalf("the endpoint's secret: %v", err)
	}
	rc.webhook.Store(wh)
	return e
}

// pay makes a payment that succeeds.
func pay(t *testing.T, c *client.Client, key string) (*client.Payment, *client.Response) {
	t.Helper()
	p, resp, err := c.CreatePayment(context.Background(), key, visa)
	if err != nil || p.Status != client.StatusSucceeded {
		t.Fatalf("payment: %+v, %v", p, err)
	}
	return p, resp
}

// eventOf returns the newest event of type typ, failing when there is none.
func eventOf(t *testing.T, c *client.Client, typ string) client.Event {
	t.Helper()
	l, err := c.ListEvents(context.Background(), 100, "")
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, e := range l.Data {
		if e.Type == typ {
			return e
		}
	}
	t.Fatalf("no %s event in %+v", typ, l.Data)
	return client.Event{}
}

// newSecret is a secret of the server's form that the server never made.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// TestServerWebhookEndpoints registers, reads, changes, rotates and deletes an
// endpoint on the real service.
func TestServerWebhookEndpoints(t *testing.T) {
	t.Parallel()
	_, c := newStack(t)
	ctx := context.Background()
	params := client.CreateWebhookEndpointParams{URL: "https://127.0.0.1:8443/hooks", EnabledEvents: []string{client.EventPaymentSucceeded}}

	e, resp, err := c.CreateWebhookEndpoint(ctx, "we-1", params)
	if err != nil || resp.StatusCode != http.StatusCreated || e.Status != client.EndpointEnabled || !strings.HasPrefix(e.ID, "we_") ||
		resp.Location != "/v1/webhook_endpoints/"+e.ID || resp.IdempotencyKey != "we-1" {
		t.Fatalf("create: %+v, %+v, %v", e, resp, err)
	}
	if _, err := client.NewWebhook(e.Secret); err != nil || !strings.HasPrefix(e.Secret, "whsec_") {
		t.Fatalf("secret %q: %v", e.Secret, err)
	}
	replay, resp, err := c.CreateWebhookEndpoint(ctx, "we-1", params)
	if err != nil || !resp.Replayed || replay.ID != e.ID || replay.Secret != "" {
		t.Fatalf("replay: %+v, %+v, %v; want the endpoint without its secret", replay, resp, err)
	}
	if got, err := c.GetWebhookEndpoint(ctx, e.ID); err != nil || got.ID != e.ID || got.Secret != "" || got.URL != params.URL {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if l, err := c.ListWebhookEndpoints(ctx, 10, ""); err != nil || len(l.Data) != 1 || l.Data[0].ID != e.ID || l.HasMore {
		t.Fatalf("list: %+v, %v", l, err)
	}

	upd, _, err := c.UpdateWebhookEndpoint(ctx, "", e.ID, client.UpdateWebhookEndpointParams{
		Status: client.EndpointDisabled, EnabledEvents: []string{client.EventAll},
	})
	if err != nil || upd.Status != client.EndpointDisabled || upd.DisabledReason == nil || *upd.DisabledReason != "by_tenant" ||
		!slices.Equal(upd.EnabledEvents, []string{client.EventAll}) || upd.URL != params.URL {
		t.Fatalf("update: %+v, %v", upd, err)
	}

	rot, _, err := c.RotateWebhookEndpointSecret(ctx, "rot-1", e.ID, client.RotateSecretParams{})
	if err != nil || rot.Secret == "" || rot.Secret == e.Secret {
		t.Fatalf("rotate: %+v, %v", rot, err)
	}
	if again, resp, err := c.RotateWebhookEndpointSecret(ctx, "rot-1", e.ID, client.RotateSecretParams{}); err != nil || !resp.Replayed || again.Secret != "" {
		t.Fatalf("rotation replay: %+v, %+v, %v", again, resp, err)
	}
	// The secret rotated out still signs for a day: a second rotation must
	// end it at once.
	_, _, err = c.RotateWebhookEndpointSecret(ctx, "", e.ID, client.RotateSecretParams{})
	if apiErr, ok := errors.AsType[*client.Error](err); !ok || apiErr.Code != client.CodeRotationInProgress {
		t.Fatalf("second rotation: %v, want rotation_in_progress", err)
	}
	zero := time.Duration(0)
	if rot2, _, err := c.RotateWebhookEndpointSecret(ctx, "", e.ID, client.RotateSecretParams{ExpireCurrentSecretIn: &zero}); err != nil || rot2.Secret == rot.Secret {
		t.Fatalf("rotation ending the older secrets: %+v, %v", rot2, err)
	}

	_, _, err = c.CreateWebhookEndpoint(ctx, "", client.CreateWebhookEndpointParams{URL: "ftp://example.com/", EnabledEvents: []string{client.EventAll}})
	if apiErr, ok := errors.AsType[*client.Error](err); !ok || !apiErr.IsInvalidRequest() || len(apiErr.Errors) == 0 || apiErr.Errors[0].Field != "url" {
		t.Fatalf("an ftp URL: %v, want invalid_request on url", err)
	}

	if d, err := c.DeleteWebhookEndpoint(ctx, e.ID); err != nil || !d.Deleted || d.ID != e.ID {
		t.Fatalf("delete: %+v, %v", d, err)
	}
	if _, err := c.DeleteWebhookEndpoint(ctx, e.ID); !isNotFound(err) {
		t.Fatalf("second delete: %v, want 404", err)
	}
	if _, err := c.GetWebhookEndpoint(ctx, e.ID); !isNotFound(err) {
		t.Fatalf("get after delete: %v, want 404", err)
	}
}

func isNotFound(err error) bool {
	apiErr, ok := errors.AsType[*client.Error](err)
	return ok && apiErr.IsNotFound()
}

// TestServerDeliveryVerified: what the server signs, client.Webhook
// verifies; the same delivery changed is refused. The event, its delivery
// log and a resend go through the client.
func TestServerDeliveryVerified(t *testing.T) {
	t.Parallel()
	_, c := newStack(t)
	ctx := context.Background()
	rc := newReceiver(t, 0)
	e := register(t, c, rc, client.EventPaymentSucceeded)

	p, _ := pay(t, c, "")
	got := rc.waitVerified(t, 1)[0]
	ev := eventOf(t, c, client.EventPaymentSucceeded)
	if id := got.header.Get(client.HeaderWebhookID); id != ev.ID {
		t.Fatalf("webhook-id %q, want the event %s", id, ev.ID)
	}
	var delivered client.Event
	if err := json.Unmarshal(got.body, &delivered); err != nil {
		t.Fatal(err)
	}
	fetched, err := c.GetEvent(ctx, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := delivered.Payment()
	if err != nil || dp.ID != p.ID || dp.Status != client.StatusSucceeded || delivered.ID != fetched.ID || !bytes.Equal(delivered.Data.Object, fetched.Data.Object) {
		t.Fatalf("delivered %s, want the event as GET answers it: %+v (%v)", got.body, fetched, err)
	}

	// The real delivery, changed, is refused.
	wh, err := client.NewWebhook(e.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(got.header, got.body); err != nil {
		t.Fatalf("the delivery again: %v", err)
	}
	changed := bytes.Replace(got.body, []byte(`"succeeded"`), []byte(`"failed"`), 1)
	if err := wh.Verify(got.header, changed); !errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("a changed body: %v", err)
	}
	if err := client.VerifySignature(newSecret(), got.header, got.body); !errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("another secret: %v", err)
	}
	if err := wh.VerifyAt(got.header, got.body, time.Now().Add(client.WebhookTolerance+time.Minute)); !errors.Is(err, client.ErrWebhookTimestamp) {
		t.Errorf("an old timestamp: %v", err)
	}
	for _, h := range []string{client.HeaderWebhookID, client.HeaderWebhookTimestamp, client.HeaderWebhookSignature} {
		without := got.header.Clone()
		without.Del(h)
		if err := wh.Verify(without, got.body); !errors.Is(err, client.ErrWebhookSignature) {
			t.Errorf("no %s: %v", h, err)
		}
	}

	// The receiver answered 200 before the worker logs it.
	stacktest.WaitFor(t, "the attempt logged", func() bool {
		l, err := c.ListWebhookDeliveryAttempts(ctx, e.ID, client.ListDeliveryAttemptsParams{})
		return err == nil && len(l.Data) == 1 && l.Data[0].StatusCode != nil && *l.Data[0].StatusCode == http.StatusOK
	})

	d, resp, err := c.ResendWebhookEvent(ctx, "", e.ID, ev.ID)
	if err != nil || resp.StatusCode != http.StatusAccepted || resp.Attempts != 1 || d.Endpoint != e.ID || d.Event != ev.ID ||
		d.Status != client.DeliveryPending || !strings.HasPrefix(d.ID, "whd_") {
		t.Fatalf("resend: %+v, %+v, %v; want the pending delivery at once", d, resp, err)
	}
	again := rc.waitVerified(t, 2)[1]
	if again.header.Get(client.HeaderWebhookID) != ev.ID || !bytes.Equal(again.body, got.body) {
		t.Fatalf("the resend: %v %s, want the same event", again.header, again.body)
	}
	stacktest.WaitFor(t, "the resend logged", func() bool {
		l, err := c.ListWebhookDeliveryAttempts(ctx, e.ID, client.ListDeliveryAttemptsParams{Limit: 1})
		return err == nil && len(l.Data) == 1 && l.HasMore && l.Data[0].Error == nil
	})

	if _, _, err := c.UpdateWebhookEndpoint(ctx, "", e.ID, client.UpdateWebhookEndpointParams{Status: client.EndpointDisabled}); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ResendWebhookEvent(ctx, "", e.ID, ev.ID)
	if apiErr, ok := errors.AsType[*client.Error](err); !ok || apiErr.Code != client.CodeEndpointDisabled {
		t.Fatalf("resend to a disabled endpoint: %v, want endpoint_disabled", err)
	}
}

// TestServerEventRequest: an event names the request that caused it, by its
// request id and its idempotency key.
func TestServerEventRequest(t *testing.T) {
	t.Parallel()
	_, c := newStack(t)
	ctx := context.Background()

	p, resp := pay(t, c, "order-1842")
	amount := int64(500)
	r, rresp, err := c.CreateRefund(ctx, "refund-1842", p.ID, client.CreateRefundParams{Amount: &amount})
	if err != nil || r.Status != client.StatusSucceeded {
		t.Fatalf("refund: %+v, %v", r, err)
	}
	for _, tt := range []struct {
		typ  string
		resp *client.Response
	}{
		{client.EventPaymentSucceeded, resp},
		{client.EventRefundSucceeded, rresp},
	} {
		ev := eventOf(t, c, tt.typ)
		if ev.Request == nil {
			t.Fatalf("%s: no request in the event (the server does not send it yet?)", tt.typ)
		}
		if ev.Request.IdempotencyKey == nil || *ev.Request.IdempotencyKey != tt.resp.IdempotencyKey {
			t.Errorf("%s: request.idempotency_key = %v, want %q", tt.typ, ev.Request.IdempotencyKey, tt.resp.IdempotencyKey)
		}
		if ev.Request.ID == nil || *ev.Request.ID != tt.resp.RequestID || !strings.HasPrefix(*ev.Request.ID, "req_") {
			t.Errorf("%s: request.id = %v, want %q", tt.typ, ev.Request.ID, tt.resp.RequestID)
		}
		if got, err := c.GetEvent(ctx, ev.ID); err != nil || got.Request == nil || !equalPtr(got.Request.ID, ev.Request.ID) {
			t.Errorf("%s: GET = %+v, %v; want the same request", tt.typ, got, err)
		}
	}
}

func equalPtr(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestServerEventDeliveries lists an event's deliveries, one per endpoint
// that wants it.
func TestServerEventDeliveries(t *testing.T) {
	t.Parallel()
	_, c := newStack(t)
	ctx := context.Background()
	all, payments := newReceiver(t, 0), newReceiver(t, 0)
	eAll := register(t, c, all, client.EventAll)
	ePayments := register(t, c, payments, client.EventPaymentSucceeded)

	p, _ := pay(t, c, "")
	amount := int64(500)
	if _, _, err := c.CreateRefund(ctx, "", p.ID, client.CreateRefundParams{Amount: &amount}); err != nil {
		t.Fatal(err)
	}
	all.waitVerified(t, 3)
	payments.waitVerified(t, 1)
	paid, refunded := eventOf(t, c, client.EventPaymentSucceeded), eventOf(t, c, client.EventRefundSucceeded)
	// The refund announces its payment refunded too, with the amount counted.
	parent := eventOf(t, c, client.EventPaymentRefunded)
	if pr, err := parent.Payment(); err != nil || pr.ID != p.ID || pr.AmountRefunded != amount {
		t.Fatalf("payment.refunded carries %+v, %v: want payment %s with %d refunded", pr, err, p.ID, amount)
	}

	for _, tt := range []struct {
		event         string
		wantEndpoints []string
	}{
		{paid.ID, []string{eAll.ID, ePayments.ID}},
		{refunded.ID, []string{eAll.ID}},
		{parent.ID, []string{eAll.ID}},
	} {
		var l *client.WebhookDeliveryList
		stacktest.WaitFor(t, "the deliveries recorded delivered", func() bool {
			var err error
			l, err = c.ListEventDeliveries(ctx, tt.event, 0, "")
			if err != nil {
				t.Fatalf("list the deliveries of %s: %v", tt.event, err)
			}
			return len(l.Data) == len(tt.wantEndpoints) && !slices.ContainsFunc(l.Data, func(d client.WebhookDelivery) bool {
				return d.Status != client.DeliveryDelivered
			})
		})
		var endpoints []string
		for _, d := range l.Data {
			endpoints = append(endpoints, d.Endpoint)
			if d.Object != "webhook_delivery" || d.Event != tt.event || d.Attempts != 1 || d.DeliveredAt == nil || !strings.HasPrefix(d.ID, "whd_") {
				t.Errorf("delivery %+v", d)
			}
		}
		if !sameSet(endpoints, tt.wantEndpoints) || l.Object != "list" || l.HasMore {
			t.Errorf("deliveries of %s to %v, want %v", tt.event, endpoints, tt.wantEndpoints)
		}
	}
	if _, err := c.ListEventDeliveries(ctx, "evt_000000000000000000000000", 0, ""); !isNotFound(err) {
		t.Errorf("deliveries of an unknown event: %v, want 404", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestServerDeliveryLogFilters filters an endpoint's delivery log by the
// attempt's outcome and by the event's type.
func TestServerDeliveryLogFilters(t *testing.T) {
	t.Parallel()
	_, c := newStack(t)
	ctx := context.Background()
	rc := newReceiver(t, 1) // the payment's first attempt fails
	e := register(t, c, rc, client.EventPaymentSucceeded, client.EventRefundSucceeded)

	logged := func(n int) func() bool {
		return func() bool {
			l, err := c.ListWebhookDeliveryAttempts(ctx, e.ID, client.ListDeliveryAttemptsParams{})
			return err == nil && len(l.Data) == n
		}
	}
	p, _ := pay(t, c, "")
	rc.waitVerified(t, 1)
	// The refund's attempt comes after both of the payment's in the log.
	stacktest.WaitFor(t, "the payment's two attempts logged", logged(2))
	amount := int64(500)
	if _, _, err := c.CreateRefund(ctx, "", p.ID, client.CreateRefundParams{Amount: &amount}); err != nil {
		t.Fatal(err)
	}
	rc.waitVerified(t, 2)
	stacktest.WaitFor(t, "the refund's attempt logged", logged(3))
	paid, refunded := eventOf(t, c, client.EventPaymentSucceeded), eventOf(t, c, client.EventRefundSucceeded)

	for _, tt := range []struct {
		name       string
		params     client.ListDeliveryAttemptsParams
		wantEvents []string // newest first
		wantStatus []int
	}{
		{"Failed", client.ListDeliveryAttemptsParams{Status: client.AttemptFailed}, []string{paid.ID}, []int{500}},
		{"Succeeded", client.ListDeliveryAttemptsParams{Status: client.AttemptSucceeded}, []string{refunded.ID, paid.ID}, []int{200, 200}},
		{"Type", client.ListDeliveryAttemptsParams{Type: client.EventPaymentSucceeded}, []string{paid.ID, paid.ID}, []int{200, 500}},
		{"StatusAndType", client.ListDeliveryAttemptsParams{Status: client.AttemptSucceeded, Type: client.EventRefundSucceeded}, []string{refunded.ID}, []int{200}},
		{"NoMatch", client.ListDeliveryAttemptsParams{Status: client.AttemptFailed, Type: client.EventRefundSucceeded}, nil, nil},
		{"Paged", client.ListDeliveryAttemptsParams{Status: client.AttemptSucceeded, Limit: 1}, []string{refunded.ID}, []int{200}},
	} {
		l, err := c.ListWebhookDeliveryAttempts(ctx, e.ID, tt.params)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var events []string
		var statuses []int
		for _, a := range l.Data {
			events = append(events, a.Event)
			if a.StatusCode != nil {
				statuses = append(statuses, *a.StatusCode)
			}
		}
		if !slices.Equal(events, tt.wantEvents) || !slices.Equal(statuses, tt.wantStatus) {
			t.Errorf("%s: attempts of %v answered %v, want %v answered %v", tt.name, events, statuses, tt.wantEvents, tt.wantStatus)
		}
		if tt.name == "Paged" && !l.HasMore {
			t.Errorf("%s: has_more false, want true", tt.name)
		}
	}
	_, err := c.ListWebhookDeliveryAttempts(ctx, e.ID, client.ListDeliveryAttemptsParams{Status: "delivered"})
	if apiErr, ok := errors.AsType[*client.Error](err); !ok || !apiErr.IsInvalidRequest() {
		t.Errorf("an unknown status filter: %v, want 400", err)
	}
}

// TestServerRecoverDeliveries: an endpoint whose deliveries failed gets
// them again after a recovery.
func TestServerRecoverDeliveries(t *testing.T) {
	t.Parallel()
	s, c := newStack(t)
	ctx := context.Background()
	rc := newReceiver(t, 0)
	rc.failing.Store(true)
	e := register(t, c, rc, client.EventAll)
	since := time.Now().Add(-time.Minute).Truncate(time.Second)

	pay(t, c, "")
	stacktest.WaitFor(t, "the delivery failed", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`) == 1
	})
	rc.failing.Store(false)

	r, resp, err := c.RecoverWebhookDeliveries(ctx, "recover-1", e.ID, since)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if resp.StatusCode != http.StatusAccepted || resp.Attempts != 1 || r.Object != "webhook_recovery" || r.Endpoint != e.ID ||
		r.Resent != 1 || r.HasMore || !r.Since.Equal(since) {
		t.Fatalf("recover: %+v, %+v; want one delivery resent at once", r, resp)
	}
	rc.waitVerified(t, 1)

	again, resp, err := c.RecoverWebhookDeliveries(ctx, "recover-1", e.ID, since)
	if err != nil || !resp.Replayed || again.Resent != 1 {
		t.Fatalf("replay: %+v, %+v, %v", again, resp, err)
	}
	stacktest.WaitFor(t, "the delivery delivered", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == 1
	})
	if none, _, err := c.RecoverWebhookDeliveries(ctx, "", e.ID, since); err != nil || none.Resent != 0 {
		t.Fatalf("a recovery with nothing failed: %+v, %v", none, err)
	}
	if _, _, err := c.RecoverWebhookDeliveries(ctx, "", "we_000000000000000000000000", since); !isNotFound(err) {
		t.Fatalf("recover an unknown endpoint: %v, want 404", err)
	}
	if _, _, err := c.UpdateWebhookEndpoint(ctx, "", e.ID, client.UpdateWebhookEndpointParams{Status: client.EndpointDisabled}); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.RecoverWebhookDeliveries(ctx, "", e.ID, since)
	if apiErr, ok := errors.AsType[*client.Error](err); !ok || apiErr.Code != client.CodeEndpointDisabled {
		t.Fatalf("recover a disabled endpoint: %v, want endpoint_disabled", err)
	}
}
