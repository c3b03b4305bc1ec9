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

-- +goose Down
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
