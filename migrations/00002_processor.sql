-- +goose Up
-- The fake card processor keeps its ledger apart from the service, in a schema
-- of its own, as a real processor would keep it in a system of its own.
CREATE SCHEMA processor;

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
    -- A failed charge says why; a successful one does not.
    CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);

-- Reconciliation asks "what happened under this key?" and "what was charged
-- for this payment?".
CREATE INDEX charges_idempotency_key ON processor.charges (idempotency_key);
CREATE INDEX charges_payment_id ON processor.charges (payment_id) WHERE payment_id IS NOT NULL;

CREATE TABLE processor.refunds (
    id              text PRIMARY KEY CHECK (id LIKE 're\_%'),
    charge_id       text NOT NULL REFERENCES processor.charges (id),
    amount          bigint NOT NULL CHECK (amount > 0),
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    idempotency_key text NOT NULL,
    created_at      timestamptz NOT NULL
);

CREATE INDEX refunds_charge_id ON processor.refunds (charge_id);

-- The processor's own idempotency keys. A row is inserted and its response
-- stored in the same transaction, so a committed row always carries the
-- response it replays; 5xx answers roll back and leave the key free.
CREATE TABLE processor.idempotency_keys (
    key                 text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 255),
    request_path        text NOT NULL,
    request_fingerprint bytea NOT NULL,
    response_status     integer,
    response_body       bytea,
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    CHECK ((response_status IS NULL) = (response_body IS NULL))
);

CREATE INDEX idempotency_keys_expires_at ON processor.idempotency_keys (expires_at);

-- +goose Down
DROP SCHEMA processor CASCADE;
