-- +goose Up
-- The processor's webhooks as the service received them: one row per event,
-- keyed by its webhook-id, so that the primary key decides which of two
-- deliveries of one event is the first (the other finds the row and changes
-- nothing), with no read before the insert. A row is written, with the job
-- that settles its operation, before the delivery is answered 2xx.
CREATE TABLE processor_events (
    id                  text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    type                text NOT NULL,
    -- The downstream idempotency key the event names, and the operation it
    -- maps to; resource_id is NULL when the service knows no such operation.
    downstream_key      text NOT NULL,
    resource_type       text,
    resource_id         text,
    -- What the event says happened, as the gateway read it.
    processor_object_id text,
    succeeded           boolean NOT NULL,
    failure_code        text,
    failure_message     text,
    amount              bigint NOT NULL,
    currency            text,
    -- The body exactly as received and verified, for review.
    payload             bytea NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now(),
    -- What processing it found: settled (it settled the operation), agreed
    -- (another path had, with the same outcome), contradiction or
    -- unknown_operation (both sent to review).
    result              text CHECK (result IN ('settled', 'agreed', 'contradiction', 'unknown_operation')),
    processed_at        timestamptz,
    CHECK ((result IS NULL) = (processed_at IS NULL))
);

-- The reaper deletes processed events past their retention, oldest first.
CREATE INDEX processor_events_processed ON processor_events (received_at) WHERE result IS NOT NULL;

-- Which path recorded an operation's outcome: the worker's call, the
-- processor's webhook or the reconciler. Exactly one does, by the key's
-- conditional move; operations from before this migration have none.
ALTER TABLE payments ADD COLUMN settled_by text CHECK (settled_by IN ('worker', 'webhook', 'reconciler'));
ALTER TABLE refunds ADD COLUMN settled_by text CHECK (settled_by IN ('worker', 'webhook', 'reconciler'));

-- +goose Down
ALTER TABLE refunds DROP COLUMN settled_by;
ALTER TABLE payments DROP COLUMN settled_by;
DROP TABLE processor_events;
