-- +goose Up
-- A tenant's webhook endpoints: where its events are POSTed, signed.
CREATE TABLE webhook_endpoints (
    id             text PRIMARY KEY CHECK (id LIKE 'we\_%'),
    tenant_id      text NOT NULL REFERENCES tenants (id),
    url            text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- Event types, or '*' for every type.
    enabled_events text[] NOT NULL CHECK (cardinality(enabled_events) BETWEEN 1 AND 16),
    description    text CHECK (length(description) <= 1000),
    status         text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    -- Why it was disabled: by the tenant, or by the receiver answering 410.
    disabled_reason text CHECK (disabled_reason IN ('by_tenant', 'gone')),
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);

CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

-- Signing secrets, encrypted with WEBHOOK_SECRETS_KEY (AES-256-GCM): never
-- stored in the clear. A rotated-out secret signs until it expires, so that
-- a receiver can switch without refusing a delivery.
CREATE TABLE webhook_endpoint_secrets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    ciphertext  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);

CREATE INDEX webhook_endpoint_secrets_endpoint ON webhook_endpoint_secrets (endpoint_id);

-- One delivery per event and endpoint, written with its job in the
-- transaction that writes the event: it exists exactly when the event does.
CREATE TABLE webhook_deliveries (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants (id),
    endpoint_id   text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      text NOT NULL REFERENCES events (id),
    status        text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    -- Attempts made in the current round (a resend starts a new round).
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz,
    UNIQUE (event_id, endpoint_id)
);

-- The age of the oldest undelivered event, and deliveries by endpoint.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);

-- The delivery log: one row per attempt.
CREATE TABLE webhook_delivery_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id   text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      text NOT NULL,
    attempt       integer NOT NULL,
    status_code   integer,
    duration_ms   integer NOT NULL,
    error         text,
    next_retry_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_delivery_attempts_endpoint ON webhook_delivery_attempts (endpoint_id, id DESC);

-- +goose Down
DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoint_secrets;
DROP TABLE webhook_endpoints;
