-- +goose Up
-- Expired keys have a state of their own, the fifth: when a finished key's
-- retention ends, the reaper drops its stored response but keeps the row as a
-- tombstone (tenant, key, fingerprint, what it created) until expires_at, now
-- the tombstone's own expiry. A retry in that window is told the key expired
-- (410) instead of silently becoming a second payment.
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check
    CHECK (recovery_point IN ('started', 'charge_created', 'refund_created', 'finished', 'expired'));

-- A tombstone keeps no response, and always has its expiry.
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tombstone_check
    CHECK (recovery_point <> 'expired' OR (response_status IS NULL AND response_body IS NULL AND expires_at IS NOT NULL));

-- The reaper walks tombstones by their expiry too.
CREATE INDEX idempotency_keys_tombstones ON idempotency_keys (expires_at) WHERE recovery_point = 'expired';

-- Sweeps for stuck work look only at keys still in progress.
DROP INDEX idempotency_keys_unfinished;
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (updated_at) WHERE recovery_point NOT IN ('finished', 'expired');

-- +goose Down
DELETE FROM idempotency_keys WHERE recovery_point = 'expired';
DROP INDEX idempotency_keys_unfinished;
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (updated_at) WHERE recovery_point <> 'finished';
DROP INDEX idempotency_keys_tombstones;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_tombstone_check;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check
    CHECK (recovery_point IN ('started', 'charge_created', 'refund_created', 'finished'));
