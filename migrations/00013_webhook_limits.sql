-- +goose NO TRANSACTION
-- +goose Up

-- Out of goose's transaction, in three parts: the catalog's changes in one
-- transaction; the widened reason's validation in another, which blocks no
-- reads or writes (SHARE UPDATE EXCLUSIVE); then the indexes on tables that
-- hold rows, built CONCURRENTLY, which no transaction may wrap. Should a
-- part fail, goose runs the file again from the top: every statement can run
-- again, and each index is dropped first, as a failed concurrent build
-- leaves an invalid one behind.
BEGIN;
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- Every change of an endpoint bumps its version: a 410 disables only the
-- version its attempt was sent to, never one the tenant has moved to a new
-- URL or enabled again since. failing_since starts a run of failed attempts,
-- which a 2xx ends; an endpoint failing for WEBHOOK_DISABLE_AFTER is disabled
-- ('failing').
ALTER TABLE webhook_endpoints
    ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS failing_since timestamptz,
    DROP CONSTRAINT IF EXISTS webhook_endpoints_disabled_reason_check,
    ADD CONSTRAINT webhook_endpoints_disabled_reason_check CHECK (disabled_reason IN ('by_tenant', 'gone', 'failing')) NOT VALID;

-- A resend starts a new chain of attempts on the delivery; attempts count
-- within the chain, and only the chain's own last attempt may fail it.
-- squawk-ignore prefer-bigint-over-int -- a count of resends of one delivery
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS chain integer NOT NULL DEFAULT 1;

-- The attempts in flight: one row while an attempt is being made, so that an
-- endpoint and a tenant each hold at most their share of the delivery
-- workers (WEBHOOK_ENDPOINT_IN_FLIGHT, WEBHOOK_TENANT_IN_FLIGHT). A row a dead
-- worker left behind stops counting at until.
CREATE TABLE IF NOT EXISTS webhook_sending (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    until       timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS webhook_sending_endpoint ON webhook_sending (endpoint_id);
CREATE INDEX IF NOT EXISTS webhook_sending_tenant ON webhook_sending (tenant_id);

-- Deliveries and attempts are shown by random ids of the shape of every other
-- id (operation.NewID: a prefix and 24 base62 characters), not by their
-- numbers, which would tell a tenant how many there are and invite guessing.
-- The random bytes are gen_random_uuid's, which are strong.
CREATE OR REPLACE FUNCTION random_id(prefix text) RETURNS text LANGUAGE sql VOLATILE AS $$
SELECT prefix || string_agg(substr('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', 1 + get_byte(b, i) % 62, 1), '' ORDER BY i)
FROM (SELECT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS b) r, generate_series(0, 23) i
$$;

-- A volatile default rewrites each table, and its unique index is built,
-- under ACCESS EXCLUSIVE. Every database in service has run this migration:
-- one that runs it now is new and its tables empty, so a backfill in batches
-- and a concurrent unique index would spare it nothing.
-- squawk-ignore adding-field-with-default, disallowed-unique-constraint -- the table is empty whenever this runs now
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS public_id text NOT NULL DEFAULT random_id('whd_') UNIQUE;
-- squawk-ignore adding-field-with-default, disallowed-unique-constraint -- the table is empty whenever this runs now
ALTER TABLE webhook_delivery_attempts ADD COLUMN IF NOT EXISTS public_id text NOT NULL DEFAULT random_id('wha_') UNIQUE;

-- The events carry the request that caused them (Stripe's event.request):
-- the API request's id and its Idempotency-Key, both null for what no API
-- request caused.
ALTER TABLE events ADD COLUMN IF NOT EXISTS request_id text, ADD COLUMN IF NOT EXISTS request_idempotency_key text;
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS request_id text;
COMMIT;

BEGIN;
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = 0;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_disabled_reason_check;
COMMIT;

-- Set for the session, and reset at the end, as the connection goes back
-- to the service's pool; a concurrent build takes as long as its table needs.
SET lock_timeout = '5s';
SET statement_timeout = 0;

-- The processor events not processed, for the age an alert watches.
DROP INDEX CONCURRENTLY IF EXISTS processor_events_unprocessed;
CREATE INDEX CONCURRENTLY IF NOT EXISTS processor_events_unprocessed ON processor_events (received_at) WHERE result IS NULL;

-- What the reaper prunes, oldest first (WEBHOOK_EVENT_RETENTION).
DROP INDEX CONCURRENTLY IF EXISTS events_created;
CREATE INDEX CONCURRENTLY IF NOT EXISTS events_created ON events (created_at);
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_created;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_created ON webhook_deliveries (created_at);
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_event;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_event ON webhook_deliveries (event_id);
DROP INDEX CONCURRENTLY IF EXISTS webhook_endpoint_secrets_expires;
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_endpoint_secrets_expires ON webhook_endpoint_secrets (expires_at) WHERE expires_at IS NOT NULL;

RESET lock_timeout;
RESET statement_timeout;

-- +goose Down
BEGIN;
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
COMMIT;
