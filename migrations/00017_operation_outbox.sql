-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The jobs first phases staged and the relay has not yet put in River's
-- queue: the service's own outbox. A first phase writes its row in the batch
-- of its key, the cheapest insert it can make; the relay in the workers moves
-- rows to River in bulk (InsertManyTx) and, in the same transaction, names
-- each job on its key (job_id) and deletes the row. key_id is the key's id,
-- found by (tenant, key, resource) in the batch; trace is the first phase's
-- trace context (traceparent, tracestate), carried to the job's metadata.
CREATE TABLE operation_outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key_id        bigint NOT NULL,
    resource_type text NOT NULL,
    resource_id   text NOT NULL,
    trace         jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE operation_outbox;
