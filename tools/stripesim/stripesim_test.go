package stripesim_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/form"

	"github.com/example/payments/tools/stripesim"
)

// apiKey is the key the tests' clients use.
const apiKey = "sk_test_stripesim"

// deadline bounds every wait of a test.
const deadline = 10 * time.Second

// env is one test's simulator, served over HTTP, and a stripe-go client of
// it.
type env struct {
	sim     *stripesim.Server
	url     string
	api     *stripego.Client
	backend stripego.Backend
}

// start serves a simulator with opts until the test ends.
func start(t *testing.T, opts stripesim.Options) *env {
	t.Helper()
	sim, url := stripesim.Serve(t, opts)
	e := &env{sim: sim, url: url}
	e.api, e.backend = client(url, apiKey)
	return e
}

// client is a stripe-go client of base with key, built as the adapter
// builds its own: no retries of stripe-go's, no telemetry, no logs.
func client(base, key string) (*stripego.Client, stripego.Backend) {
	backend := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		HTTPClient:        &http.Client{Timeout: deadline},
		URL:               stripego.String(base),
		MaxNetworkRetries: stripego.Int64(0),
		EnableTelemetry:   stripego.Bool(false),
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	api := stripego.NewClient(key, stripego.WithBackends(&stripego.Backends{
		API: backend, Connect: backend, Uploads: backend, MeterEvents: backend,
	}))
	return api, backend
}

// charge is the params of a charge as the adapter makes it: amount usd,
// confirmed with pm, authentication an error, metadata downstream_key.
func charge(amount int64, pm, key string) *stripego.PaymentIntentCreateParams {
	p := &stripego.PaymentIntentCreateParams{
		Amount:                stripego.Int64(amount),
		Currency:              stripego.String("usd"),
		Confirm:               stripego.Bool(true),
		ErrorOnRequiresAction: stripego.Bool(true),
		PaymentMethod:         stripego.String(pm),
		PaymentMethodTypes:    []*string{stripego.String("card")},
		Metadata:              map[string]string{"downstream_key": key},
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// create creates a PaymentIntent with params.
func (e *env) create(ctx context.Context, params *stripego.PaymentIntentCreateParams) (*stripego.PaymentIntent, error) {
	return e.api.V1PaymentIntents.Create(ctx, params)
}

// mustCreate creates a PaymentIntent with params, which must succeed.
func (e *env) mustCreate(t *testing.T, params *stripego.PaymentIntentCreateParams) *stripego.PaymentIntent {
	t.Helper()
	pi, err := e.create(context.Background(), params)
	if err != nil {
		t.Fatalf("create payment intent: %v", err)
	}
	return pi
}

// get calls GET path with params in the query into page, as the adapter
// calls lists and searches.
func (e *env) get(t *testing.T, path string, params stripego.ParamsContainer, page stripego.LastResponseSetter) error {
	t.Helper()
	query := &form.Values{}
	form.AppendTo(query, params)
	return e.backend.CallRaw(http.MethodGet, path, apiKey, []byte(query.Encode()), params.GetParams(), page)
}

// stripeError is the Stripe error answer err holds; the test fails without
// one.
func stripeError(t *testing.T, err error) *stripego.Error {
	t.Helper()
	var se *stripego.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a Stripe error answer", err)
	}
	return se
}

// wantError checks that err is Stripe's answer status with type typ and
// code.
func wantError(t *testing.T, err error, status int, typ stripego.ErrorType, code stripego.ErrorCode) *stripego.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %d %s/%s", status, typ, code)
	}
	se := stripeError(t, err)
	if se.HTTPStatusCode != status || se.Type != typ || se.Code != code {
		t.Fatalf("error %d %s/%s (%s); want %d %s/%s", se.HTTPStatusCode, se.Type, se.Code, se.Msg, status, typ, code)
	}
	if se.RequestID == "" {
		t.Errorf("error answer has no Request-Id")
	}
	return se
}

// replayed reports whether an answer replayed a saved one.
func replayed(r *stripego.APIResponse) bool {
	return r != nil && r.Header.Get("Idempotent-Replayed") == "true"
}

// waitFor polls cond until it holds, or fails the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up after %s waiting for %s", deadline, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fence is the params of the adapter's fence: a PaymentIntent never
// confirmed, with no payment method.
func fence() *stripego.PaymentIntentCreateParams {
	return &stripego.PaymentIntentCreateParams{Amount: stripego.Int64(50), Currency: stripego.String("usd"),
		Confirm: stripego.Bool(false), PaymentMethodTypes: []*string{stripego.String("card")},
		Metadata: map[string]string{"fence": "true"}}
}
