-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The worker making the attempt that holds a place among those in flight:
-- its presence (database.Presence), an advisory lock its session holds for
-- life. A place whose worker's lock is free belongs to a dead worker and is
-- freed at the next look, not when its until passes. NULL: a place handed to
-- a delivery whose job has not claimed it yet, freed by its until.
-- squawk-ignore prefer-bigint-over-int -- a presence id, the int key of pg_advisory_lock(int, int)
ALTER TABLE webhook_sending ADD COLUMN worker integer;

-- +goose Down
ALTER TABLE webhook_sending DROP COLUMN worker;
