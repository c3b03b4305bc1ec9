-- +goose Up
-- The fake card processor keeps its ledger apart from the service, in a schema
-- of its own, as a real processor would keep it in a system of its own. The
-- fake processor applies these migrations itself when it starts, with goose's
-- version table fakeprocessor_db_version: the service's migrations know
-- nothing of it, and deleting the stand-in leaves nothing of it behind.
CREATE SCHEMA IF NOT EXISTS processor;

-- One row per charge attempt that reached the card network: succeeded or
-- declined. A 5xx before charging leaves no row.
CREATE TABLE processor.charges (
    id              text PRIMARY KEY CHECK (id LIKE 'ch\_%'),
    idempotency_key text NOT NULL,
    payment_id      text,
    amount          bigint NOT NULL CHECK (amount > 0),
    currency        text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_method  text NOT NULL,
    description     text,
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    failure_code    text,
    failure_message text,
    amount_refunded bigint NOT NULL DEFAULT 0 CHECK (amount_refunded BETWEEN 0 AND amount),
    created_at      timestamptz NOT NULL,
    CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);

CREATE INDEX charges_idempotency_key ON processor.charges (idempotency_key);
CREATE INDEX charges_payment_id ON processor.charges (payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX charges_created_at_id ON processor.charges (created_at, id);

CREATE TABLE processor.refunds (
    id              text PRIMARY KEY CHECK (id LIKE 're\_%'),
    charge_id       text NOT NULL REFERENCES processor.charges (id),
    amount          bigint NOT NULL CHECK (amount > 0),
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    idempotency_key text NOT NULL,
    created_at      timestamptz NOT NULL
);

CREATE INDEX refunds_charge_id ON processor.refunds (charge_id);
CREATE INDEX refunds_idempotency_key ON processor.refunds (idempotency_key);
CREATE INDEX refunds_created_at_id ON processor.refunds (created_at, id);

-- The processor's own idempotency keys, one key space for every kind of
-- operation. Closing a key is the fence the service raises before it gives up
-- on an operation: once the close commits, nothing can ever be made with that
-- key. closed_at says when the key was first closed. A key closed before
-- anything was made under it is a row with no response (a fence), which every
-- later POST with the key is refused on; a key closed after its operation keeps
-- its response, so that the operation's own retries still replay it. A closed
-- key is never forgotten: its expires_at is 'infinity'.
CREATE TABLE processor.idempotency_keys (
    key                 text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 255),
    request_path        text NOT NULL,
    request_fingerprint bytea NOT NULL,
    response_status     integer,
    response_body       bytea,
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    closed_at           timestamptz,
    CHECK ((response_status IS NULL) = (response_body IS NULL)),
    CONSTRAINT idempotency_keys_closed_never_expires CHECK (closed_at IS NULL OR expires_at = 'infinity')
);

CREATE INDEX idempotency_keys_expires_at ON processor.idempotency_keys (expires_at);

-- The processor's outgoing webhooks, a durable queue: an event is inserted in
-- the transaction that records its operation (so it exists exactly when the
-- operation does), and a sender claims it, posts it and records the result.
-- body is the exact JSON sent, fixed at creation, so every retry of an event
-- carries the same bytes under the same id; traceparent is the trace of the
-- operation it tells of, sent with every delivery.
CREATE TABLE processor.webhook_events (
    id              text PRIMARY KEY CHECK (id LIKE 'evt\_%'),
    type            text NOT NULL,
    body            bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'dropped', 'abandoned')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    last_error      text,
    traceparent     text,
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL)),
    CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);

CREATE INDEX webhook_events_due ON processor.webhook_events (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP SCHEMA processor CASCADE;
