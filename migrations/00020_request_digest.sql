-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- SHA-256 over a key's request exactly as received (method, path and the
-- body's raw bytes; idempotency.Digest), beside the fingerprint of its
-- canonical JSON. A retry sends the same bytes: a digest that matches
-- answers it without canonicalizing its body. Only a shortcut: any other
-- retry is still matched by its fingerprint. NULL: a key stored before this
-- column, matched by its fingerprint alone.
ALTER TABLE idempotency_keys ADD COLUMN request_digest bytea;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN request_digest;
