-- +goose Up
-- Operations whose outcome the worker could not learn (its retry budget ran
-- out, or nothing was driving them any more), waiting for the reconciler.
-- Payments and refunds alike: one row per operation, deleted in the phase that
-- finishes it.
CREATE TABLE reconciliations (
    resource_type text NOT NULL CHECK (resource_type IN ('payment', 'refund')),
    resource_id   text NOT NULL,
    marked_at     timestamptz NOT NULL DEFAULT now(),
    -- When a reconcile run last tried it. Runs take the least recently tried
    -- first, so what cannot be settled yet never blocks what can.
    tried_at      timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    PRIMARY KEY (resource_type, resource_id)
);

CREATE INDEX reconciliations_fair ON reconciliations (tried_at NULLS FIRST, marked_at);

INSERT INTO reconciliations (resource_type, resource_id, marked_at)
SELECT 'payment', id, reconcile_since FROM payments WHERE reconcile_since IS NOT NULL;

ALTER TABLE payments DROP COLUMN reconcile_since;

-- What an operator must look at: every discrepancy between the processor's
-- ledger and ours, and every operation the service gave up on. A case is
-- recorded once, however often it is detected: (kind, reference) is unique.
CREATE TABLE needs_review (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL,
    -- The processor's charge or refund id for a discrepancy; the payment or
    -- refund id for an operation given up on.
    reference   text NOT NULL,
    detail      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    UNIQUE (kind, reference)
);

CREATE INDEX needs_review_open ON needs_review (created_at) WHERE resolved_at IS NULL;

-- +goose Down
DROP TABLE needs_review;
ALTER TABLE payments ADD COLUMN reconcile_since timestamptz;
UPDATE payments p SET reconcile_since = r.marked_at
FROM reconciliations r WHERE r.resource_type = 'payment' AND r.resource_id = p.id;
CREATE INDEX payments_to_reconcile ON payments (reconcile_since) WHERE reconcile_since IS NOT NULL;
DROP TABLE reconciliations;
