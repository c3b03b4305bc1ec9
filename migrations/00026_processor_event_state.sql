-- +goose NO TRANSACTION
-- +goose Up

-- Out of goose's transaction, in two of its own. A CHECK added with its
-- column is validated by a scan of the table under ACCESS EXCLUSIVE, which
-- blocks every read and write meanwhile; added NOT VALID, it holds that lock
-- only for the change of the catalog and checks the rows written from then
-- on, and its validation, committed apart, scans under SHARE UPDATE
-- EXCLUSIVE, which blocks neither. Should the validation fail (a lock
-- timeout), goose runs the file again from the top, and the first
-- transaction can run again.

-- The state a processor event reports, when it names one of its kind's
-- states (a success the processor has not finished, say); NULL when it says
-- only whether the operation succeeded, and the kind's first final state of
-- that outcome is meant.
BEGIN;
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';
ALTER TABLE processor_events
    ADD COLUMN IF NOT EXISTS status text,
    DROP CONSTRAINT IF EXISTS processor_events_status_check,
    ADD CONSTRAINT processor_events_status_check CHECK (status ~ '^[a-z]+(_[a-z]+)*$') NOT VALID;
COMMIT;

-- The scan takes as long as the table needs: no statement timeout.
BEGIN;
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = 0;
ALTER TABLE processor_events VALIDATE CONSTRAINT processor_events_status_check;
COMMIT;

-- +goose Down
ALTER TABLE processor_events DROP COLUMN status;
