-- +goose Up

-- The server a claim was made on: its postmaster's start time
-- (pg_postmaster_start_time()), read as a name and never compared but for
-- equality. A place among the webhook attempts in flight, and a reconcile
-- batch, are judged by their worker's presence only on the server they
-- were claimed on: a failover or a restart cuts every presence, and the
-- workers take theirs back a few seconds apart, so a claim made before
-- belongs to a worker that may be alive, and holds until its time runs
-- out. NULL (claimed before this column, or by a version without it):
-- never judged so. Nullable columns without a default: changes of the
-- catalog only.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';
ALTER TABLE webhook_sending ADD COLUMN instance timestamptz;
ALTER TABLE reconciliations ADD COLUMN claimed_on timestamptz;

-- Whether worker holds its presence (database.Presence): a granted
-- advisory lock of the presence class, in this database, held by a
-- presence's session (its application_name, which pg_stat_activity shows
-- to every role), never another session's transaction lock taken for a
-- moment to learn that the worker is gone.
-- +goose StatementBegin
CREATE FUNCTION holds_presence(class integer, worker integer, application text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid::bigint = class AND l.objid::bigint = worker AND l.objsubid = 2
            AND l.granted AND a.application_name = application)
$$;
-- +goose StatementEnd

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP FUNCTION holds_presence(integer, integer, text);
ALTER TABLE reconciliations DROP COLUMN claimed_on;
ALTER TABLE webhook_sending DROP COLUMN instance;
