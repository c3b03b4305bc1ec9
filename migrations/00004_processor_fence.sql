-- +goose Up
-- Closing a key is the fence the service raises before it gives up on an
-- operation: once the close commits, no charge or refund can ever be made with
-- that key. closed_at says when the key was first closed. A key closed before
-- anything was made under it is a row with no response (a fence), which every
-- later POST with the key is refused on; a key closed after its operation keeps
-- its response, so that the operation's own retries still replay it.
ALTER TABLE processor.idempotency_keys ADD COLUMN closed_at timestamptz;

-- A closed key is never forgotten: were it to expire, the next POST with it
-- would take it over and could charge after all. Its expires_at is 'infinity',
-- which the takeover of expired keys (and any future sweep by expires_at)
-- never reaches.
ALTER TABLE processor.idempotency_keys
    ADD CONSTRAINT idempotency_keys_closed_never_expires
    CHECK (closed_at IS NULL OR expires_at = 'infinity');

-- Reconciliation asks "what was refunded under this key?", as it already asks
-- for charges.
CREATE INDEX refunds_idempotency_key ON processor.refunds (idempotency_key);

-- The ledger is paged oldest first by (created_at, id); these serve both the
-- created_after bound and the starting_after cursor.
CREATE INDEX charges_created_at_id ON processor.charges (created_at, id);
CREATE INDEX refunds_created_at_id ON processor.refunds (created_at, id);

-- +goose Down
DROP INDEX processor.refunds_created_at_id;
DROP INDEX processor.charges_created_at_id;
DROP INDEX processor.refunds_idempotency_key;
ALTER TABLE processor.idempotency_keys DROP CONSTRAINT idempotency_keys_closed_never_expires;
-- Fence rows stay: with an infinite expiry and the close path as their request
-- path, every POST with their key is still refused, as idempotency_key_reused.
ALTER TABLE processor.idempotency_keys DROP COLUMN closed_at;
