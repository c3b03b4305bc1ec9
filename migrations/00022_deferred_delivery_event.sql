-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- A finishing transaction fans its event out to the deliveries with its first
-- read, before the event's own insert, which goes with its COMMIT: a
-- delivery's reference to its event is checked at the commit. Deleting an
-- event a delivery names still fails, at the commit.
ALTER TABLE webhook_deliveries ALTER CONSTRAINT webhook_deliveries_event_id_fkey DEFERRABLE INITIALLY DEFERRED;

-- +goose Down
ALTER TABLE webhook_deliveries ALTER CONSTRAINT webhook_deliveries_event_id_fkey NOT DEFERRABLE;
