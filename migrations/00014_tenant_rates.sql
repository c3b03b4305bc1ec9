-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The rate limit of each tenant's idempotent POSTs, shared by every API
-- replica (TENANT_RATE_LIMIT per TENANT_RATE_WINDOW): one row per tenant,
-- its window opened by the first request after the last one ended, by the
-- database's clock, and the requests counted in it. The upsert that counts a
-- request holds the row until its commit, so two replicas never both take the
-- last place.
CREATE TABLE tenant_rates (
    tenant_id    text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    window_start timestamptz NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- requests in one window, at most TENANT_RATE_LIMIT
    count        integer NOT NULL
);

-- +goose Down
DROP TABLE tenant_rates;
