-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The job that may make a delivery's attempts: the last one inserted for it,
-- written in the transaction that inserts it. A job of a worker that died
-- stays running until River rescues it, and by then a newer job may have
-- been inserted for its delivery (handed a place in line, or resent): the
-- older one finds it is not the delivery's job any more and ends, so that no
-- delivery is ever attempted by two jobs at once. NULL: any job may (a
-- delivery whose job was inserted before this column).
ALTER TABLE webhook_deliveries ADD COLUMN job bigint;

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN job;
