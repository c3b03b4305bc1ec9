-- +goose Up

-- A tenant's delete and the first writes of its operations take turns.
-- Every first phase takes the tenant's write lock shared (tenant_writes,
-- its first statement) and then finds the tenant, refusing with SQLSTATE
-- 23503 (constraint tenant_gone) when it is gone; the delete guard takes
-- the lock alone before it looks for rows, so it waits for the first phases
-- in flight and sees what they commit, and the first phases that come
-- after it find the tenant gone. The lock is an advisory one (class
-- 0x74656e61, "tena", and the tenant id's hash), not the tenant row's FOR
-- KEY SHARE, which every concurrent first phase of a tenant would share as
-- a new MultiXact and a WAL record on the tenant's page (00018). Two
-- tenants whose ids hash alike only wait for each other's deletes.
-- Only functions change: no table is locked or read.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- +goose StatementBegin
CREATE FUNCTION tenant_writes(tenant text) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1952804449, hashtext(tenant));
    -- A statement of its own, so that its snapshot is taken after the lock:
    -- a delete that committed while this waited is seen.
    IF NOT EXISTS (SELECT 1 FROM tenants WHERE id = tenant) THEN
        RAISE EXCEPTION 'tenant "%" does not exist', tenant
            USING ERRCODE = 'foreign_key_violation', TABLE = 'tenants', CONSTRAINT = 'tenant_gone';
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION refuse_tenant_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    unguarded regclass;
    used boolean;
BEGIN
    -- The first phases in flight commit first; those after find the tenant
    -- gone (tenant_writes).
    PERFORM pg_advisory_xact_lock(1952804449, hashtext(OLD.id));
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

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP FUNCTION tenant_writes(text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION refuse_tenant_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
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
