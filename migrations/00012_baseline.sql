-- +goose Up
-- The service's schema, whole. Migrations 00001 to 00011 were folded into this
-- baseline; a database they made is refused here (make a new one: it cannot be
-- upgraded in place). The fake processor's schema is its own, migrated by the
-- fake processor (tools/fakeprocessor/migrations). River's tables come from
-- River's own migrator, in the same command.
-- squawk-ignore-file require-lock-timeout, require-statement-timeout -- every table is created in this migration, empty
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regclass('public.payments') IS NOT NULL THEN
        RAISE EXCEPTION 'this database was made by the migrations before the baseline (00001 to 00011): '
            'make a new database, the baseline cannot upgrade it';
    END IF;
END $$;
-- +goose StatementEnd

-- Tenants and their API keys. Keys are stored only as SHA-256 hashes.
CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_hash   bytea PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per (tenant, Idempotency-Key). The row is the recovery point of the
-- operation it started and, once finished, the response that is replayed.
-- Once its retention ends, the reaper drops the response and keeps the row as
-- a tombstone (recovery point expired) until expires_at, the tombstone's own
-- expiry: a retry then is told the key expired (410), never executed again.
-- job_id is the River job that drives the key's operation, as InsertTx
-- returned it in the first phase, so that the sweep can ask River (through its
-- public API) whether that job will still run; none for a key finished in its
-- first phase. The recovery points between started and finished are each
-- kind's <object>_created: a migration that adds a kind widens the check.
CREATE TABLE idempotency_keys (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    key                 text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_method      text NOT NULL,
    request_path        text NOT NULL,
    request_fingerprint bytea NOT NULL,
    recovery_point      text NOT NULL,
    locked_at           timestamptz,
    resource_type       text,
    resource_id         text,
    job_id              bigint,
    -- squawk-ignore prefer-bigint-over-int -- an HTTP status
    response_status     integer,
    response_headers    jsonb,
    response_body       bytea,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    expires_at          timestamptz,
    UNIQUE (tenant_id, key),
    CONSTRAINT idempotency_keys_recovery_point_check
        CHECK (recovery_point IN ('started', 'charge_created', 'refund_created', 'finished', 'expired')),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL AND finished_at IS NOT NULL AND expires_at IS NOT NULL)),
    CONSTRAINT idempotency_keys_tombstone_check
        CHECK (recovery_point <> 'expired' OR (response_status IS NULL AND response_body IS NULL AND expires_at IS NOT NULL))
);

CREATE INDEX idempotency_keys_reapable ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_tombstones ON idempotency_keys (expires_at) WHERE recovery_point = 'expired';
-- The sweep, and the worker's metrics, look only at keys still in progress.
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (updated_at) WHERE recovery_point NOT IN ('finished', 'expired');

-- A payment (package payments). Its row outlives its key.
CREATE TABLE payments (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    idempotency_key_id  bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount              bigint NOT NULL CHECK (amount BETWEEN 1 AND 99999999),
    currency            text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_method      text NOT NULL,
    description         text,
    metadata            jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL CHECK (status IN ('processing', 'succeeded', 'failed')),
    failure_code        text,
    failure_message     text,
    processor_charge_id text,
    amount_refunded     bigint NOT NULL DEFAULT 0 CHECK (amount_refunded BETWEEN 0 AND amount),
    settled_by          text CHECK (settled_by IN ('worker', 'webhook', 'reconciler')),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX payments_tenant_created ON payments (tenant_id, created_at DESC, id DESC);

-- A refund of a payment (package refunds).
CREATE TABLE refunds (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    payment_id          text NOT NULL REFERENCES payments (id),
    idempotency_key_id  bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount              bigint NOT NULL CHECK (amount BETWEEN 1 AND 99999999),
    reason              text CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer')),
    status              text NOT NULL CHECK (status IN ('processing', 'succeeded', 'failed')),
    failure_code        text,
    processor_refund_id text,
    settled_by          text CHECK (settled_by IN ('worker', 'webhook', 'reconciler')),
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX refunds_payment ON refunds (payment_id);

-- The immutable events the phase that finishes an operation stages.
CREATE TABLE events (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    type        text NOT NULL,
    resource_id text NOT NULL,
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);

CREATE INDEX events_tenant_created ON events (tenant_id, created_at DESC, id DESC);

-- Operations whose outcome the worker could not learn (its retry budget ran
-- out, or nothing was driving them any more), waiting for the reconciler: one
-- row per operation, deleted in the phase that finishes it. A migration that
-- adds a kind widens the check.
CREATE TABLE reconciliations (
    resource_type text NOT NULL CONSTRAINT reconciliations_resource_type_check CHECK (resource_type IN ('payment', 'refund')),
    resource_id   text NOT NULL,
    marked_at     timestamptz NOT NULL DEFAULT now(),
    tried_at      timestamptz,
    -- squawk-ignore prefer-bigint-over-int -- a count of reconciliation tries
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    PRIMARY KEY (resource_type, resource_id)
);

CREATE INDEX reconciliations_fair ON reconciliations (tried_at NULLS FIRST, marked_at);

-- What an operator must look at: one row per case, however often detected.
CREATE TABLE needs_review (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL,
    reference   text NOT NULL,
    detail      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    UNIQUE (kind, reference)
);

CREATE INDEX needs_review_open ON needs_review (created_at) WHERE resolved_at IS NULL;

-- The processor's webhooks as the service received them: one row per event,
-- keyed by its webhook-id, so that the primary key decides which of two
-- deliveries of one event is the first (the other finds the row and changes
-- nothing), with no read before the insert. A row is written, with the job
-- that settles its operation, before the delivery is answered 2xx.
CREATE TABLE processor_events (
    id                  text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    type                text NOT NULL,
    downstream_key      text NOT NULL,
    resource_type       text,
    resource_id         text,
    processor_object_id text,
    succeeded           boolean NOT NULL,
    failure_code        text,
    failure_message     text,
    amount              bigint NOT NULL,
    currency            text,
    payload             bytea NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now(),
    result              text CHECK (result IN ('settled', 'agreed', 'contradiction', 'unknown_operation')),
    processed_at        timestamptz,
    CHECK ((result IS NULL) = (processed_at IS NULL))
);

CREATE INDEX processor_events_processed ON processor_events (received_at) WHERE result IS NOT NULL;

-- A tenant's webhook endpoints: where its events are POSTed, signed.
CREATE TABLE webhook_endpoints (
    id              text PRIMARY KEY CHECK (id LIKE 'we\_%'),
    tenant_id       text NOT NULL REFERENCES tenants (id),
    url             text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    enabled_events  text[] NOT NULL CHECK (cardinality(enabled_events) BETWEEN 1 AND 16),
    description     text CHECK (length(description) <= 1000),
    status          text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason text CHECK (disabled_reason IN ('by_tenant', 'gone')),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);

CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

-- Signing secrets, encrypted with WEBHOOK_SECRETS_KEY (AES-256-GCM): never
-- stored in the clear. A rotated-out secret signs until expires_at.
CREATE TABLE webhook_endpoint_secrets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    ciphertext  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);

CREATE INDEX webhook_endpoint_secrets_endpoint ON webhook_endpoint_secrets (endpoint_id);

-- One delivery per event and endpoint, written with its job in the
-- transaction that stages the event.
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL REFERENCES tenants (id),
    endpoint_id  text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id     text NOT NULL REFERENCES events (id),
    status       text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    -- squawk-ignore prefer-bigint-over-int -- a count of attempts at one delivery
    attempts     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    UNIQUE (event_id, endpoint_id)
);

CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);

-- The delivery log: one row per attempt.
CREATE TABLE webhook_delivery_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id   text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      text NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- the number of an attempt at one delivery
    attempt       integer NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- an HTTP status
    status_code   integer,
    -- squawk-ignore prefer-bigint-over-int -- an attempt's duration in milliseconds (2^31 are 24 days)
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
DROP TABLE processor_events;
DROP TABLE needs_review;
DROP TABLE reconciliations;
DROP TABLE events;
DROP TABLE refunds;
DROP TABLE payments;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE tenants;
