-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The deliveries waiting for a place among the attempts in flight
-- (webhook_sending), oldest first. A delivery in line has no job: the
-- attempt that ends hands its place to the oldest waiting for its endpoint,
-- else to the oldest of its tenant whose endpoint has room, and inserts that
-- delivery's job in the transaction that records it; a periodic sweep hands
-- out the places that expired instead (a dead worker's).
CREATE TABLE webhook_waiting (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_waiting_tenant ON webhook_waiting (tenant_id, since);
CREATE INDEX webhook_waiting_endpoint ON webhook_waiting (endpoint_id, since);

-- An endpoint's last 2xx, to the minute: written at most once a minute, so
-- that an endpoint's row is not a lock every attempt to it waits for. A run
-- of failures (failing_since) is over once a 2xx comes after its start.
ALTER TABLE webhook_endpoints ADD COLUMN last_success_at timestamptz;

-- +goose Down
ALTER TABLE webhook_endpoints DROP COLUMN last_success_at;
DROP TABLE webhook_waiting;
