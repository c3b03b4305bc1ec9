-- +goose Up

SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- A tenant that still has rows is never deleted. The tables every operation
-- writes carry their tenant without a foreign key (00018, 00021), so no
-- foreign key refuses the delete; a tenant re-created under the same id
-- would inherit the rows. This trigger refuses it as a foreign key would
-- (SQLSTATE 23503, constraint tenants_in_use): it looks in every table of
-- the schema with a tenant_id column and no foreign key to tenants on it,
-- so a table a new kind adds is covered with no edit here. Deleting a
-- tenant is rare and done by hand: the looks into refunds and deliveries,
-- which have no index led by tenant_id (one would cost every insert), scan.

-- +goose StatementBegin
CREATE FUNCTION refuse_tenant_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    unguarded regclass;
    used boolean;
BEGIN
    FOR unguarded IN
        SELECT c.oid::regclass FROM pg_class c
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
        WHERE c.relkind IN ('r', 'p') AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'tenants'::regclass)
            AND c.oid <> 'tenants'::regclass
            AND NOT EXISTS (SELECT 1 FROM pg_constraint k
                WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.confrelid = 'tenants'::regclass)
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE tenant_id = $1)', unguarded) INTO used USING OLD.id;
        IF used THEN
            RAISE EXCEPTION 'tenant "%" still has rows in "%"', OLD.id, unguarded
                USING ERRCODE = 'foreign_key_violation', TABLE = 'tenants', CONSTRAINT = 'tenants_in_use';
        END IF;
    END LOOP;
    RETURN OLD;
END $$;
-- +goose StatementEnd

CREATE TRIGGER tenants_in_use BEFORE DELETE ON tenants FOR EACH ROW EXECUTE FUNCTION refuse_tenant_in_use();

-- +goose Down
DROP TRIGGER tenants_in_use ON tenants;
DROP FUNCTION refuse_tenant_in_use();
