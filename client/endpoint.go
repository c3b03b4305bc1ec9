package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// The statuses of a webhook endpoint: only an enabled one gets deliveries.
const (
	EndpointEnabled  = "enabled"
	EndpointDisabled = "disabled"
)

// WebhookEndpoint is where a tenant's events are POSTed, signed with its
// secret. DisabledReason is by_tenant, gone (the receiver answered 410) or
// failing, and nil while enabled.
type WebhookEndpoint struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	URL            string    `json:"url"`
	EnabledEvents  []string  `json:"enabled_events"`
	Description    *string   `json:"description"`
	Status         string    `json:"status"`
	DisabledReason *string   `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// Secret is set only in the answer that made it (create, rotate), never
	// in a replay, a get or a list: keep it then.
	Secret string `json:"secret,omitempty"`
}

// CreateWebhookEndpointParams is the body of a new webhook endpoint: an https
// URL, and the event types it gets (EventAll for every type).
type CreateWebhookEndpointParams struct {
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description,omitempty"`
}

// UpdateWebhookEndpointParams changes a webhook endpoint: fields left empty
// (nil) stay as they are. Status is EndpointEnabled or EndpointDisabled.
type UpdateWebhookEndpointParams struct {
	URL           string   `json:"url,omitempty"`
	EnabledEvents []string `json:"enabled_events,omitempty"`
	Description   *string  `json:"description,omitempty"`
	Status        string   `json:"status,omitempty"`
}

// RotateSecretParams is the body of a secret rotation. ExpireCurrentSecretIn
// is how long the current secrets keep signing alongside the new one, in
// whole seconds up to a week; nil keeps the server's default (a day), and a
// pointer to 0 retires them at once.
type RotateSecretParams struct {
	ExpireCurrentSecretIn *time.Duration `json:"-"`
}

// MarshalJSON encodes the rotation as the API takes it, in seconds.
func (p RotateSecretParams) MarshalJSON() ([]byte, error) {
	var body struct {
		ExpireCurrentSecretIn *int64 `json:"expire_current_secret_in,omitempty"`
	}
	if p.ExpireCurrentSecretIn != nil {
		s := int64(*p.ExpireCurrentSecretIn / time.Second)
		body.ExpireCurrentSecretIn = &s
	}
	return json.Marshal(body)
}

// WebhookEndpointList is one page of webhook endpoints, newest first.
type WebhookEndpointList = List[WebhookEndpoint]

// DeletedWebhookEndpoint is the answer to a delete.
type DeletedWebhookEndpoint struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// WebhookRecovery is the answer to RecoverWebhookDeliveries: how many failed
// deliveries created since Since were started again. One recovery resends a
// bounded number: HasMore reports that failed ones are left, for another
// recovery under another key.
type WebhookRecovery struct {
	Object   string    `json:"object"`
	Endpoint string    `json:"endpoint"`
	Since    time.Time `json:"since"`
	Resent   int       `json:"resent"`
	HasMore  bool      `json:"has_more"`
}

// CreateWebhookEndpoint registers a webhook endpoint under idempotencyKey, or
// under a key generated once for this call when it is "", retrying as
// CreatePayment does. The endpoint's Secret is in this answer only: a replay
// (resp.Replayed) has none. The Response is never nil.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, idempotencyKey string, p CreateWebhookEndpointParams) (*WebhookEndpoint, *Response, error) {
	return post[WebhookEndpoint](ctx, c, send[WebhookEndpoint], "create webhook endpoint", idempotencyKey, "/v1/webhook_endpoints", p)
}

// GetWebhookEndpoint returns the webhook endpoint with the given id, without
// its secret.
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error) {
	return fetchID[WebhookEndpoint](ctx, c, http.MethodGet, "get webhook endpoint", id, endpointPath(id))
}

// ListWebhookEndpoints returns a page of webhook endpoints, newest first, as
// ListPayments does.
func (c *Client) ListWebhookEndpoints(ctx context.Context, limit int, startingAfter string) (*WebhookEndpointList, error) {
	return fetch[WebhookEndpointList](ctx, c, http.MethodGet, listPath("/v1/webhook_endpoints", limit, startingAfter))
}

// UpdateWebhookEndpoint changes the webhook endpoint id under idempotencyKey,
// or under a key generated once for this call when it is "". Enabling it
// again delivers only the events from then on: RecoverWebhookDeliveries
// or ResendWebhookEvent deliver those missed. The Response is never nil.
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, idempotencyKey, id string, p UpdateWebhookEndpointParams) (*WebhookEndpoint, *Response, error) {
	return postID[WebhookEndpoint](ctx, c, send[WebhookEndpoint], "update webhook endpoint", idempotencyKey, id, endpointPath(id), p)
}

// DeleteWebhookEndpoint removes the webhook endpoint id, its pending
// deliveries and its delivery log. A retry after an answer was lost may find
// it gone already: a 404 *Error.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) (*DeletedWebhookEndpoint, error) {
	return fetchID[DeletedWebhookEndpoint](ctx, c, http.MethodDelete, "delete webhook endpoint", id, endpointPath(id))
}

// RotateWebhookEndpointSecret gives the webhook endpoint id a new secret,
// under idempotencyKey or a key generated once for this call when it is "".
// The new Secret is in this answer only. While a secret rotated out earlier
// still signs, the rotation is refused with a 409 *Error of code
// rotation_in_progress, unless p retires the older secrets at once. The
// Response is never nil.
func (c *Client) RotateWebhookEndpointSecret(ctx context.Context, idempotencyKey, id string, p RotateSecretParams) (*WebhookEndpoint, *Response, error) {
	return postID[WebhookEndpoint](ctx, c, send[WebhookEndpoint], "rotate webhook endpoint secret", idempotencyKey, id,
		endpointPath(id)+"/rotate_secret", p)
}

// ResendWebhookEvent delivers the event eventID to the webhook endpoint
// endpointID again, under idempotencyKey or a key generated once for this
// call when it is "", and returns the delivery, pending (resp.StatusCode
// 202). A delivery still being attempted is refused with a 409 *Error of code
// delivery_in_flight, a disabled endpoint with endpoint_disabled. The
// Response is never nil.
func (c *Client) ResendWebhookEvent(ctx context.Context, idempotencyKey, endpointID, eventID string) (*WebhookDelivery, *Response, error) {
	if endpointID == "" || eventID == "" {
		return nil, &Response{IdempotencyKey: keyOrNew(idempotencyKey)}, errors.New("resend webhook event: empty endpoint or event id")
	}
	body := struct {
		Event string `json:"event"`
	}{eventID}
	return post[WebhookDelivery](ctx, c, start[WebhookDelivery], "resend webhook event", idempotencyKey, endpointPath(endpointID)+"/resend", body)
}

// RecoverWebhookDeliveries resends the failed deliveries of the webhook
// endpoint id created since then, under idempotencyKey or a key generated
// once for this call when it is "", and returns how many it started again
// (resp.StatusCode 202). The endpoint must be enabled: a disabled one is
// refused with a 409 *Error of code endpoint_disabled. The Response is never
// nil.
func (c *Client) RecoverWebhookDeliveries(ctx context.Context, idempotencyKey, id string, since time.Time) (*WebhookRecovery, *Response, error) {
	body := struct {
		Since string `json:"since"`
	}{since.UTC().Format(time.RFC3339Nano)}
	return postID[WebhookRecovery](ctx, c, start[WebhookRecovery], "recover webhook deliveries", idempotencyKey, id,
		endpointPath(id)+"/recover", body)
}

// endpointPath is the path of the webhook endpoint id.
func endpointPath(id string) string {
	return "/v1/webhook_endpoints/" + url.PathEscape(id)
}
