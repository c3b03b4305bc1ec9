-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- A reconcile pass holds the operations it claims until it notes its try,
-- its lease ends (RECONCILE_TIMEOUT, the bound of a pass), or its worker's
-- presence is gone (claimed_by, a database.Presence ID), so that passes on
-- several workers do not all take the same operations and make the same
-- processor calls at once, and a killed worker's claims are free at once.
-- squawk-ignore prefer-bigint-over-int -- a presence id, the int key of pg_advisory_lock(int, int)
ALTER TABLE reconciliations ADD COLUMN claimed_until timestamptz, ADD COLUMN claimed_by integer;

-- +goose Down
ALTER TABLE reconciliations DROP COLUMN claimed_until, DROP COLUMN claimed_by;
