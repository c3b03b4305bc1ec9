-- +goose Up

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

-- +goose Down
DROP TABLE webhook_waiting;
