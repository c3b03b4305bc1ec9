-- +goose Up

-- Every change of an endpoint bumps its version: a 410 disables only the
-- version its attempt was sent to, never one the tenant has moved to a new
-- URL or enabled again since. failing_since starts a run of failed attempts,
-- which a 2xx ends; an endpoint failing for WEBHOOK_DISABLE_AFTER is disabled
-- ('failing').
ALTER TABLE webhook_endpoints
    ADD COLUMN version bigint NOT NULL DEFAULT 1,
    ADD COLUMN failing_since timestamptz,
    DROP CONSTRAINT webhook_endpoints_disabled_reason_check,
    ADD CONSTRAINT webhook_endpoints_disabled_reason_check CHECK (disabled_reason IN ('by_tenant', 'gone', 'failing'));

-- A resend starts a new chain of attempts on the delivery; attempts count
-- within the chain, and only the chain's own last attempt may fail it.
ALTER TABLE webhook_deliveries ADD COLUMN chain integer NOT NULL DEFAULT 1;

-- The attempts in flight: one row while an attempt is being made, so that an
-- endpoint and a tenant each hold at most their share of the delivery
-- workers (WEBHOOK_ENDPOINT_IN_FLIGHT, WEBHOOK_TENANT_IN_FLIGHT). A row a dead
-- worker left behind stops counting at until.
CREATE TABLE webhook_sending (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    until       timestamptz NOT NULL
);

CREATE INDEX webhook_sending_endpoint ON webhook_sending (endpoint_id);
CREATE INDEX webhook_sending_tenant ON webhook_sending (tenant_id);

-- The processor events not processed, for the age an alert watches.
CREATE INDEX processor_events_unprocessed ON processor_events (received_at) WHERE result IS NULL;

-- What the reaper prunes, oldest first (WEBHOOK_EVENT_RETENTION).
CREATE INDEX events_created ON events (created_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
CREATE INDEX webhook_endpoint_secrets_expires ON webhook_endpoint_secrets (expires_at) WHERE expires_at IS NOT NULL;

-- Deliveries and attempts are shown by random ids of the shape of every other
-- id (operation.NewID: a prefix and 24 base62 characters), not by their
-- numbers, which would tell a tenant how many there are and invite guessing.
-- The random bytes are gen_random_uuid's, which are strong.
CREATE FUNCTION random_id(prefix text) RETURNS text LANGUAGE sql VOLATILE AS $$
SELECT prefix || string_agg(substr('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', 1 + get_byte(b, i) % 62, 1), '' ORDER BY i)
FROM (SELECT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS b) r, generate_series(0, 23) i
$$;

ALTER TABLE webhook_deliveries ADD COLUMN public_id text NOT NULL DEFAULT random_id('whd_') UNIQUE;
ALTER TABLE webhook_delivery_attempts ADD COLUMN public_id text NOT NULL DEFAULT random_id('wha_') UNIQUE;

-- The events carry the request that caused them (Stripe's event.request):
-- the API request's id and its Idempotency-Key, both null for what no API
-- request caused.
ALTER TABLE events ADD COLUMN request_id text, ADD COLUMN request_idempotency_key text;
ALTER TABLE idempotency_keys ADD COLUMN request_id text;

-- +goose Down
ALTER TABLE events DROP COLUMN request_id, DROP COLUMN request_idempotency_key;
ALTER TABLE idempotency_keys DROP COLUMN request_id;
ALTER TABLE webhook_delivery_attempts DROP COLUMN public_id;
ALTER TABLE webhook_deliveries DROP COLUMN public_id;
DROP FUNCTION random_id(text);
DROP INDEX events_created;
DROP INDEX webhook_deliveries_created;
DROP INDEX webhook_deliveries_event;
DROP INDEX webhook_endpoint_secrets_expires;
DROP INDEX processor_events_unprocessed;
DROP TABLE webhook_sending;
ALTER TABLE webhook_deliveries DROP COLUMN chain;
UPDATE webhook_endpoints SET disabled_reason = 'by_tenant' WHERE disabled_reason = 'failing';
ALTER TABLE webhook_endpoints
    DROP COLUMN version,
    DROP COLUMN failing_since,
    DROP CONSTRAINT webhook_endpoints_disabled_reason_check,
    ADD CONSTRAINT webhook_endpoints_disabled_reason_check CHECK (disabled_reason IN ('by_tenant', 'gone'));
