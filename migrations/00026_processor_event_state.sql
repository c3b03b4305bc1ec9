-- +goose Up

-- The state a processor event reports, when it names one of its kind's
-- states (a success the processor has not finished, say); NULL when it says
-- only whether the operation succeeded, and the kind's first final state of
-- that outcome is meant.
ALTER TABLE processor_events ADD COLUMN status text CHECK (status ~ '^[a-z]+(_[a-z]+)*$');

-- +goose Down
ALTER TABLE processor_events DROP COLUMN status;
