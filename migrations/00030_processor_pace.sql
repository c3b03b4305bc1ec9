-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The processor's rate limit, shared by every worker (PROCESSOR_RATE_LIMIT,
-- gateway.Pace): one row per processor, the time of its next free turn, by
-- the database's clock. Each request to the processor moves it on by one
-- turn in an upsert that holds the row for the statement and its commit,
-- so two workers never take the same turn.
CREATE TABLE processor_pace (
    processor text PRIMARY KEY,
    next_turn timestamptz NOT NULL
);

-- +goose Down
DROP TABLE processor_pace;
