-- +goose Up

-- The deliveries waiting for a place among the attempts in flight
-- (webhook_sending), oldest first: the attempt that frees a place wakes the
-- oldest of its tenant whose endpoint has room, by making its job run now
-- (River's JobRetryTx, by the id its job gave). A wake that is lost (a worker
-- killed between) costs only time: a waiting job runs again on its own after
-- the longest an attempt can hold its place.
CREATE TABLE webhook_waiting (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    job_id      bigint NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_waiting_tenant ON webhook_waiting (tenant_id, since);

-- +goose Down
DROP TABLE webhook_waiting;
