-- +goose Up

-- The server a place among the attempts in flight was claimed on: its
-- postmaster's start time (pg_postmaster_start_time()), read as a name and
-- never compared but for equality. A place is judged by its worker's
-- presence only on the server it was claimed on: a failover or a restart
-- cuts every presence, and the workers take theirs back a few seconds
-- apart, so a place claimed before belongs to a worker that may be alive,
-- and counts until its until passes. NULL (claimed before this column, or
-- by a version without it): never judged so.
-- A nullable column without a default: a change of the catalog only.
SET LOCAL lock_timeout = '5s';
ALTER TABLE webhook_sending ADD COLUMN instance timestamptz;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE webhook_sending DROP COLUMN instance;
