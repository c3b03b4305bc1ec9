-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The tables every first phase writes carry their tenant without a foreign
-- key. A foreign key locks the tenant's one row (FOR KEY SHARE) in every
-- insert: all of a tenant's concurrent first phases share that lock, each
-- one a new MultiXact and a WAL record on the tenant's page. Tenants are
-- never deleted, and tenant_id is written only from an authenticated API key
-- (whose own foreign key stays).
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_tenant_id_fkey;
ALTER TABLE payments DROP CONSTRAINT payments_tenant_id_fkey;
ALTER TABLE refunds DROP CONSTRAINT refunds_tenant_id_fkey;

-- +goose Down
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE payments ADD CONSTRAINT payments_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE refunds ADD CONSTRAINT refunds_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
