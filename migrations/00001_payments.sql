-- +goose Up
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
CREATE TABLE idempotency_keys (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    key                 text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_method      text NOT NULL,
    request_path        text NOT NULL,
    request_fingerprint bytea NOT NULL,
    recovery_point      text NOT NULL CHECK (recovery_point IN ('started', 'charge_created', 'refund_created', 'finished')),
    locked_at           timestamptz,
    resource_type       text,
    resource_id         text,
    response_status     integer,
    response_headers    jsonb,
    response_body       bytea,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    expires_at          timestamptz,
    UNIQUE (tenant_id, key),
    -- A finished key always carries the response it replays and its expiry.
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL AND finished_at IS NOT NULL AND expires_at IS NOT NULL))
);

-- The reaper walks finished keys by expiry; unfinished keys are never reaped.
CREATE INDEX idempotency_keys_reapable ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
-- Sweeps for stuck work look only at unfinished keys.
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (updated_at) WHERE recovery_point <> 'finished';

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
    -- Set when the worker could not learn the charge's outcome within its
    -- retry budget, or found the payment stuck: the reconciler settles it.
    reconcile_since     timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX payments_tenant_created ON payments (tenant_id, created_at DESC, id DESC);
CREATE INDEX payments_to_reconcile ON payments (reconcile_since) WHERE reconcile_since IS NOT NULL;

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
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX refunds_payment ON refunds (payment_id);

-- Immutable events staged by the phase that finishes an operation.
CREATE TABLE events (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    type        text NOT NULL,
    resource_id text NOT NULL,
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);

CREATE INDEX events_tenant_created ON events (tenant_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE events;
DROP TABLE refunds;
DROP TABLE payments;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE tenants;
