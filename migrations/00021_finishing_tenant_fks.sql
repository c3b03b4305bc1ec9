-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- The tables every finishing transaction writes carry their tenant without a
-- foreign key either, as the first phase's do (00018): the event each
-- operation stages as it finishes, and its deliveries. A foreign key to the
-- tenant locks the tenant's one row (FOR KEY SHARE) in every insert, so all
-- of a tenant's concurrent finishing transactions share that lock, each one
-- a new MultiXact and a WAL record on the tenant's page. Tenants are never
-- deleted; an event's tenant is its operation's, and a delivery's is its
-- endpoint's, whose own foreign keys stay.
ALTER TABLE events DROP CONSTRAINT events_tenant_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_tenant_id_fkey;

-- +goose Down
ALTER TABLE events ADD CONSTRAINT events_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id);
