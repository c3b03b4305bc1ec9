// Package webhooks is the tenants' webhook endpoints: registering,
// changing and removing them, their signing secrets (encrypted at rest,
// rotated with a grace period), and delivering every event to each enabled
// endpoint that wants it through the outbox: a delivery is written, with its
// job, in the transaction that writes the event, and the job POSTs it, signed
// as Standard Webhooks specifies, retrying on a schedule, through a client
// that cannot reach the inside network.
package webhooks

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/signing"
)

// Resource declares endpoints as what an idempotency key creates, and where
// the API serves them.
var Resource = operation.Resource{Type: "webhook_endpoint", Prefix: "we_", Path: "/v1/webhook_endpoints"}

// ResourceType names endpoints as the resource of an idempotency key.
var ResourceType = Resource.Type

// Endpoint statuses.
const (
	StatusEnabled  = client.EndpointEnabled
	StatusDisabled = client.EndpointDisabled
)

// Limits of an endpoint's fields.
const (
	MaxDescription   = 1000
	MaxEnabledEvents = 16
	// DefaultGrace is how long a rotated-out secret still signs, unless the
	// rotation says otherwise; MaxGrace bounds what it may say.
	DefaultGrace = 24 * time.Hour
	MaxGrace     = 7 * 24 * time.Hour
)

var (
	// ErrNotFound reports an endpoint that does not exist for the tenant.
	ErrNotFound = operation.NotFound("webhook endpoint")
	// ErrDisabled reports a resend or a recovery to a disabled endpoint.
	ErrDisabled = errors.New("the webhook endpoint is disabled")
	// ErrDeliveryInFlight reports a resend of a delivery whose attempts go
	// on: one chain of attempts per delivery.
	ErrDeliveryInFlight = errors.New("the delivery is still being attempted")
	// ErrRotating reports a rotation while the endpoint has as many secrets
	// signing as it may.
	ErrRotating = errors.New("the endpoint has as many signing secrets as it may")
	// ErrTooManyEndpoints reports a tenant at its limit of endpoints.
	ErrTooManyEndpoints = errors.New("the tenant has as many webhook endpoints as it may")
)

// Rules are how the API answers the endpoints' own refusals.
var Rules = []operation.ErrorRule{
	{Err: ErrDisabled, Status: 409, Code: "endpoint_disabled", Title: "Endpoint disabled",
		Detail: "The webhook endpoint is disabled: enable it first."},
	{Err: ErrDeliveryInFlight, Status: 409, Code: "delivery_in_flight", Title: "Delivery in flight",
		Detail: "This event's delivery to this endpoint is still being attempted, on its retry schedule; resend it once it has failed."},
	{Err: ErrRotating, Status: 409, Code: "rotation_in_progress", Title: "Rotation in progress",
		Detail: "A secret rotated out earlier still signs: wait until it expires, or rotate with expire_current_secret_in 0 to end every older secret at once."},
	{Err: ErrTooManyEndpoints, Status: 400, Code: "endpoint_limit_reached", Title: "Too many webhook endpoints",
		Detail: "The account has as many webhook endpoints as it may (WEBHOOK_MAX_ENDPOINTS): delete one first."},
}

// Endpoint is a tenant's webhook endpoint: what the API shows of it (the
// client's type, so that the two cannot drift apart), and whose it is.
// Secret is set only in the answer that made it (create, rotate): it is
// never stored in the clear, never replayed.
type Endpoint struct {
	client.WebhookEndpoint

	TenantID string `json:"-"`
}

// NewEndpoint is the request to register an endpoint.
type NewEndpoint struct {
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
}

// Update is the request to change an endpoint: absent fields stay; a
// description of null removes the endpoint's; null is no value for the
// other fields, which cannot be null, and is refused (checkNulls).
type Update struct {
	URL           *string  `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
	// Status is enabled or disabled.
	Status *string `json:"status"`
	// nulls are the fields the request set to null, which decoding alone
	// would read as absent.
	nulls []string
}

// UnmarshalJSON decodes u and notes the fields set to null.
func (u *Update) UnmarshalJSON(b []byte) error {
	type fields Update // without this method
	if err := json.Unmarshal(b, (*fields)(u)); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	u.nulls = nil
	for _, name := range []string{"url", "enabled_events", "description", "status"} {
		if v, ok := raw[name]; ok && string(v) == "null" {
			u.nulls = append(u.nulls, name)
		}
	}
	return nil
}

// checkNulls refuses null for each field that cannot be null: all but the
// description.
func (u Update) checkNulls() []operation.FieldError {
	var errs []operation.FieldError
	for _, name := range u.nulls {
		if name != "description" {
			errs = append(errs, operation.FieldError{Field: name, Message: "must not be null: leave it out to keep it"})
		}
	}
	return errs
}

// Rotation is the request to rotate an endpoint's secret.
type Rotation struct {
	// ExpireCurrentSecretIn is how many seconds the current secret still
	// signs, alongside the new one (default a day, at most a week; 0 stops
	// it at once).
	ExpireCurrentSecretIn *int64 `json:"expire_current_secret_in"`
}

// Resend is the request to deliver one event to one endpoint again.
type Resend struct {
	Event string `json:"event"`
}

// Service manages the tenants' endpoints.
type Service struct {
	// Ops runs the first phase of every change, in the shape of every
	// idempotent POST (operation.Service.Start).
	Ops  *operation.Service
	Jobs Jobs
	// Policy decides which URLs may be registered.
	Policy safehttp.Policy
	Cipher signing.Box
	// EventTypes are the event types an endpoint may ask for (those the
	// kinds stage); "*" asks for all.
	EventTypes []string
	// MaxEndpoints is how many endpoints a tenant may have.
	MaxEndpoints int
	// MaxSecrets is how many secrets of an endpoint may sign at once: the
	// current one and those being rotated out.
	MaxSecrets int
}

// stored is the endpoint with status, without its secret: a stored
// response never holds one.
func (e Endpoint) stored(status int) idempotency.Response {
	e.Secret = ""
	return render.Stored(status, "application/json", Resource.Path+"/"+e.ID, render.Encode(e))
}

// changed is the plan of a change to endpoint e: its rows, and e with status
// as the answer stored on the key.
func changed(e *Endpoint, status int, rows func(b *pgx.Batch)) operation.Plan {
	return operation.Plan{
		Resource: idempotency.ResourceRef{Type: Resource.Type, ID: e.ID},
		Rows:     rows,
		Response: func() idempotency.Response { return e.stored(status) },
	}
}
