-- +goose Up
-- The processor's outgoing webhooks, a durable queue: an event is inserted in
-- the transaction that records its operation (so it exists exactly when the
-- operation does), and a sender claims it, posts it and records the result.
-- body is the exact JSON sent, fixed at creation, so every retry of an event
-- carries the same bytes under the same id.
CREATE TABLE processor.webhook_events (
    id              text PRIMARY KEY CHECK (id LIKE 'evt\_%'),
    type            text NOT NULL,
    body            bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    -- pending: to be sent, at next_attempt_at; delivered: answered 2xx;
    -- dropped: never sent, on purpose (chaos); abandoned: retried past the
    -- horizon without a 2xx.
    state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'dropped', 'abandoned')),
    -- Attempts started. A claim counts its attempt before sending, so an
    -- attempt cut short by a crash is counted too.
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When a pending event is next due. A claim moves it forward by a lease,
    -- so that an event whose sender died is claimed again once it passes.
    next_attempt_at timestamptz,
    delivered_at    timestamptz,
    last_error      text,
    CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL)),
    CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);

-- The sender looks for due events only among the pending ones.
CREATE INDEX webhook_events_due ON processor.webhook_events (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP TABLE processor.webhook_events;
