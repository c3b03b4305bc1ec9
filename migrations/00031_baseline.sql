-- +goose Up
-- The service's schema, whole: every table, index, rule and function the
-- service's code reads and writes is made here, and a new change is a file
-- of its own after this one. The fake processor's schema is its own,
-- migrated by the fake processor (tools/fakeprocessor/migrations). River's
-- tables come from River's own migrator, in the same command (api migrate).
--
-- The tables are made empty, in goose's one transaction: nothing else can
-- see them until it commits, so no statement here waits for a lock another
-- holds, and the timeouts are only the rule every migration keeps.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- A database the migrations before this baseline made (versions 1 to 30)
-- holds this schema already, or an older one: it is refused, since this
-- file makes every table anew.
-- +goose StatementBegin
DO $$
DECLARE
    made_before boolean := to_regclass('public.payments') IS NOT NULL;
BEGIN
    IF NOT made_before AND to_regclass('goose_db_version') IS NOT NULL THEN
        made_before := EXISTS (SELECT 1 FROM goose_db_version WHERE version_id BETWEEN 1 AND 30);
    END IF;
    IF NOT made_before THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'this database was made by the service''s migrations before 00031_baseline.sql '
        '(goose versions 1 to 30: 00001 to 00011, then 00012_baseline.sql to 00030_processor_pace.sql), '
        'which 00031_baseline.sql folds in and cannot upgrade in place: create a new, empty database and '
        'run "api migrate" on it (copying the rows across if you need them), or keep serving this one with '
        'a release from before the fold';
END $$;
-- +goose StatementEnd

-- The rules of rows
--
-- The rules of the rows every operation writes (its key, and its payment or
-- refund) are checked by one trigger on each table instead of CHECK
-- constraints: they fail with the SQLSTATE a CHECK fails with (23514,
-- check_violation) and the name a CHECK would have. Postgres reads a
-- table's CHECK constraints back from their stored text, and plans them
-- again, in every statement that writes the table, about 1 KB of text a
-- rule; a PL/pgSQL function plans its expressions once per connection. Each
-- trigger fires on the columns its rules read (UPDATE OF): the relay's
-- update of a key's job_id checks nothing again. The rules of the other
-- tables, written far less often, are CHECK constraints.
--
-- A new kind of operation needs nothing here: its key's recovery point
-- (<object>_created) and its reconciliation type are admitted by their
-- shape, and its table's trigger is operation_row_rules, named with the
-- kind's statuses.

-- +goose StatementBegin
-- check_violation fails as the CHECK constraint named rule on relation
-- fails.
CREATE FUNCTION check_violation(relation text, rule text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', relation, rule
        USING ERRCODE = 'check_violation', TABLE = relation, CONSTRAINT = rule;
END $$;
-- +goose StatementEnd

-- The recovery points a key can stand at: started, finished, expired (the
-- tombstone), and each kind's <object>_created, its object lower-case words
-- joined by underscores (charge_created, refund_created).
CREATE FUNCTION recovery_point_known(point text) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN point IN ('started', 'finished', 'expired') OR point ~ '^[a-z]+(_[a-z]+)*_created$';

-- +goose StatementBegin
-- operation_rules checks the rules every operation's row keeps, named after
-- its relation (<relation>_amount_check and so on): an amount of 1 to
-- 99999999 minor units, a status among its kind's statuses, and settled by
-- one of the worker, a webhook or the reconciler (NULL until it settles).
CREATE FUNCTION operation_rules(relation text, amount bigint, status text, statuses text[], settled_by text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (amount BETWEEN 1 AND 99999999) THEN
        PERFORM check_violation(relation, relation || '_amount_check');
    END IF;
    IF NOT (status = ANY (statuses)) THEN
        PERFORM check_violation(relation, relation || '_status_check');
    END IF;
    IF NOT (settled_by IN ('worker', 'webhook', 'reconciler')) THEN
        PERFORM check_violation(relation, relation || '_settled_by_check');
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- currency_rules checks an operation's currency, an ISO 4217 code in upper
-- case (<relation>_currency_check).
CREATE FUNCTION currency_rules(relation text, currency text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (currency ~ '^[A-Z]{3}$') THEN
        PERFORM check_violation(relation, relation || '_currency_check');
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
-- operation_row_rules is the trigger of a kind whose row has no rules of
-- its own: it checks NEW.amount, NEW.status, NEW.settled_by
-- (operation_rules) and NEW.currency (currency_rules), the kind's statuses
-- being the trigger's arguments:
--   CREATE TRIGGER rules BEFORE INSERT OR UPDATE OF amount, currency, status, settled_by
--       ON payouts FOR EACH ROW EXECUTE FUNCTION operation_row_rules('processing', 'paid', 'failed');
CREATE FUNCTION operation_row_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(TG_TABLE_NAME, NEW.amount, NEW.status, TG_ARGV, NEW.settled_by);
    PERFORM currency_rules(TG_TABLE_NAME, NEW.currency);
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- Deliveries and attempts are shown by random ids of the shape of every other
-- id (operation.NewID: a prefix and 24 base62 characters), not by their
-- numbers, which would tell a tenant how many there are and invite guessing.
-- The random bytes are gen_random_uuid's, which are strong.
CREATE FUNCTION random_id(prefix text) RETURNS text LANGUAGE sql VOLATILE AS $$
SELECT prefix || string_agg(substr('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', 1 + get_byte(b, i) % 62, 1), '' ORDER BY i)
FROM (SELECT uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) AS b) r, generate_series(0, 23) i
$$;

-- Whether worker holds its presence (database.Presence): a granted
-- advisory lock of the presence class, in this database, held by a
-- presence's session (its application_name, which pg_stat_activity shows
-- to every role), never another session's transaction lock taken for a
-- moment to learn that the worker is gone.
-- +goose StatementBegin
CREATE FUNCTION holds_presence(class integer, worker integer, application text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid::bigint = class AND l.objid::bigint = worker AND l.objsubid = 2
            AND l.granted AND a.application_name = application)
$$;
-- +goose StatementEnd

-- Tenants

-- Tenants and their API keys. Keys are stored only as SHA-256 hashes.
CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_hash   bytea PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id),
    created_at timestamptz NOT NULL DEFAULT now()
);

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

-- The tables every first phase and every finishing transaction writes (keys,
-- operations, events, deliveries, the webhook places and line) carry their
-- tenant without a foreign key. A foreign key locks the tenant's one row
-- (FOR KEY SHARE) in every insert: all of a tenant's concurrent
-- transactions would share that lock, each one a new MultiXact and a WAL
-- record on the tenant's page. tenant_id is written only from an
-- authenticated API key (whose own foreign key stays), or copied from the
-- operation or the endpoint a row belongs to. Two rules stand in for the
-- foreign key: tenant_writes and the delete guard (tenants_in_use, at the
-- end of this file).
--
-- A tenant's delete and the first writes of its operations take turns.
-- Every first phase takes the tenant's write lock shared (tenant_writes,
-- its first statement) and then finds the tenant, refusing with SQLSTATE
-- 23503 (constraint tenant_gone) when it is gone; the delete guard takes
-- the lock alone before it looks for rows, so it waits for the first phases
-- in flight and sees what they commit, and the first phases that come
-- after it find the tenant gone. The lock is an advisory one (class
-- 0x74656e61, "tena", and the tenant id's hash), not the tenant row's FOR
-- KEY SHARE. Two tenants whose ids hash alike only wait for each other's
-- deletes.
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

-- Keys and operations

-- One row per (tenant, Idempotency-Key). The row is the recovery point of the
-- operation it started and, once finished, the response that is replayed.
-- Once its retention ends, the reaper drops the response and keeps the row as
-- a tombstone (recovery point expired) until expires_at, the tombstone's own
-- expiry: a retry then is told the key expired (410), never executed again.
-- job_id is the River job that drives the key's operation, as the relay
-- named it (operation_outbox), so that the sweep can ask River (through its
-- public API) whether that job will still run; none for a key finished in its
-- first phase. The recovery points between started and finished are each
-- kind's <object>_created (recovery_point_known). request_id is the API
-- request that made the key. request_digest is SHA-256 over the key's
-- request exactly as received (method, path and the body's raw bytes;
-- idempotency.Digest), beside the fingerprint of its canonical JSON: a retry
-- sends the same bytes, and a digest that matches answers it without
-- canonicalizing its body. Only a shortcut: any other retry is still matched
-- by its fingerprint, as is a key with no digest (NULL).
CREATE TABLE idempotency_keys (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id           text NOT NULL,
    key                 text NOT NULL,
    request_method      text NOT NULL,
    request_path        text NOT NULL,
    request_fingerprint bytea NOT NULL,
    recovery_point      text NOT NULL,
    locked_at           timestamptz,
    resource_type       text,
    resource_id         text,
    job_id              bigint,
    -- squawk-ignore prefer-bigint-over-int -- an HTTP status
    response_status     integer,
    response_headers    jsonb,
    response_body       bytea,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    expires_at          timestamptz,
    request_id          text,
    request_digest      bytea,
    UNIQUE (tenant_id, key)
);

CREATE INDEX idempotency_keys_reapable ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_tombstones ON idempotency_keys (expires_at) WHERE recovery_point = 'expired';
-- The sweep, and the worker's metrics, look only at keys still in progress.
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (updated_at) WHERE recovery_point NOT IN ('finished', 'expired');

-- +goose StatementBegin
CREATE FUNCTION idempotency_keys_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (length(NEW.key) BETWEEN 1 AND 255) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'idempotency_keys_key_check');
    END IF;
    IF NOT recovery_point_known(NEW.recovery_point) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'idempotency_keys_recovery_point_check');
    END IF;
    -- Finished exactly when the response and its times are stored.
    IF NOT ((NEW.recovery_point = 'finished') = (NEW.response_status IS NOT NULL AND NEW.finished_at IS NOT NULL AND NEW.expires_at IS NOT NULL)) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'idempotency_keys_check');
    END IF;
    -- A tombstone keeps no response, and keeps its own expiry.
    IF NOT (NEW.recovery_point <> 'expired' OR (NEW.response_status IS NULL AND NEW.response_body IS NULL AND NEW.expires_at IS NOT NULL)) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'idempotency_keys_tombstone_check');
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER rules BEFORE INSERT OR UPDATE OF key, recovery_point, response_status, response_body, finished_at, expires_at
    ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION idempotency_keys_rules();

-- An operation's table holds the columns every operation has, which the
-- machinery names, writes and reads (package operation, rows.go): id,
-- tenant_id, idempotency_key_id, amount, currency, status,
-- processor_<object>_id, failure_code, failure_message, settled_by,
-- created_at and updated_at; then the kind's own columns, which only the
-- kind writes.

-- A payment (package payments). Its row outlives its key. Its rules are
-- every operation's (operation_rules, currency_rules) and its own: no more
-- refunded than paid (payments_check).
CREATE TABLE payments (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL,
    idempotency_key_id  bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount              bigint NOT NULL,
    currency            text NOT NULL,
    payment_method      text NOT NULL,
    description         text,
    metadata            jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL,
    failure_code        text,
    failure_message     text,
    processor_charge_id text,
    amount_refunded     bigint NOT NULL DEFAULT 0,
    settled_by          text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX payments_tenant_created ON payments (tenant_id, created_at DESC, id DESC);

-- +goose StatementBegin
-- payments_rules is the payments' trigger, the payment's statuses its
-- arguments.
CREATE FUNCTION payments_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(TG_TABLE_NAME, NEW.amount, NEW.status, TG_ARGV, NEW.settled_by);
    PERFORM currency_rules(TG_TABLE_NAME, NEW.currency);
    IF NOT (NEW.amount_refunded BETWEEN 0 AND NEW.amount) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'payments_check');
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER rules BEFORE INSERT OR UPDATE OF amount, currency, status, amount_refunded, settled_by
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_rules('processing', 'succeeded', 'failed');

-- A refund of a payment (package refunds), in the payment's currency. A
-- refund may wait: pending is a refund that a processor took and settles
-- only later, by its webhook. Its rules are every operation's
-- (operation_rules, currency_rules) and its reason's.
CREATE TABLE refunds (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL,
    payment_id          text NOT NULL REFERENCES payments (id),
    idempotency_key_id  bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount              bigint NOT NULL,
    currency            text NOT NULL,
    reason              text,
    status              text NOT NULL,
    failure_code        text,
    failure_message     text,
    processor_refund_id text,
    settled_by          text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE INDEX refunds_payment ON refunds (payment_id);

-- +goose StatementBegin
-- refunds_rules is the refunds' trigger, the refund's statuses its
-- arguments.
CREATE FUNCTION refunds_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(TG_TABLE_NAME, NEW.amount, NEW.status, TG_ARGV, NEW.settled_by);
    PERFORM currency_rules(TG_TABLE_NAME, NEW.currency);
    IF NOT (NEW.reason IN ('duplicate', 'fraudulent', 'requested_by_customer')) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'refunds_reason_check');
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

CREATE TRIGGER rules BEFORE INSERT OR UPDATE OF amount, currency, reason, status, settled_by
    ON refunds FOR EACH ROW EXECUTE FUNCTION refunds_rules('processing', 'succeeded', 'failed', 'pending');

-- A refund's success is counted on its payment (amount_refunded) as its
-- status is recorded, in the same statement: a success adds its amount, and
-- a failure after a success (the processor's later word) takes it back. The
-- machinery's write of the outcome is the same for every kind; this is the
-- refund's own.
-- +goose StatementBegin
CREATE FUNCTION refunds_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE payments
    SET amount_refunded = amount_refunded + CASE WHEN NEW.status = 'succeeded' THEN NEW.amount ELSE -NEW.amount END,
        updated_at = now()
    WHERE id = NEW.payment_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER counted AFTER UPDATE OF status ON refunds FOR EACH ROW
    WHEN ((OLD.status = 'succeeded') <> (NEW.status = 'succeeded'))
    EXECUTE FUNCTION refunds_count();

-- The jobs first phases staged and the relay has not yet put in River's
-- queue: the service's own outbox. A first phase writes its row in the batch
-- of its key, the cheapest insert it can make; the relay in the workers moves
-- rows to River in bulk (InsertManyTx) and, in the same transaction, names
-- each job on its key (job_id) and deletes the row. key_id is the key's id,
-- found by (tenant, key, resource) in the batch; trace is the first phase's
-- trace context (traceparent, tracestate), carried to the job's metadata.
CREATE TABLE operation_outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key_id        bigint NOT NULL,
    resource_type text NOT NULL,
    resource_id   text NOT NULL,
    trace         jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- The immutable events the phase that finishes an operation stages. They
-- carry the request that caused them (Stripe's event.request): the API
-- request's id and its Idempotency-Key, both null for what no API request
-- caused.
CREATE TABLE events (
    id                      text PRIMARY KEY,
    tenant_id               text NOT NULL,
    type                    text NOT NULL,
    resource_id             text NOT NULL,
    data                    jsonb NOT NULL,
    created_at              timestamptz NOT NULL,
    request_id              text,
    request_idempotency_key text
);

CREATE INDEX events_tenant_created ON events (tenant_id, created_at DESC, id DESC);
-- What the reaper prunes, oldest first (WEBHOOK_EVENT_RETENTION).
CREATE INDEX events_created ON events (created_at);

-- Operations whose outcome the worker could not learn (its retry budget ran
-- out, or nothing was driving them any more), waiting for the reconciler: one
-- row per operation, deleted in the phase that finishes it. resource_type is
-- the kind's type, lower-case words joined by underscores.
--
-- A reconcile pass holds the operations it claims until it notes its try,
-- its lease ends (claimed_until: RECONCILE_TIMEOUT, the bound of a pass), or
-- its worker's presence is gone (claimed_by, a database.Presence ID), so
-- that passes on several workers do not all take the same operations and
-- make the same processor calls at once, and a killed worker's claims are
-- free at once. claimed_on is the server the claim was made on (see
-- webhook_places.instance): the presence is judged only there.
CREATE TABLE reconciliations (
    resource_type text NOT NULL CONSTRAINT reconciliations_resource_type_check CHECK (resource_type ~ '^[a-z]+(_[a-z]+)*$'),
    resource_id   text NOT NULL,
    marked_at     timestamptz NOT NULL DEFAULT now(),
    tried_at      timestamptz,
    -- squawk-ignore prefer-bigint-over-int -- a count of reconciliation tries
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    claimed_until timestamptz,
    -- squawk-ignore prefer-bigint-over-int -- a presence id, the int key of pg_advisory_lock(int, int)
    claimed_by    integer,
    claimed_on    timestamptz,
    PRIMARY KEY (resource_type, resource_id)
);

CREATE INDEX reconciliations_fair ON reconciliations (tried_at NULLS FIRST, marked_at);

-- What an operator must look at: one row per case, however often detected.
CREATE TABLE needs_review (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL,
    reference   text NOT NULL,
    detail      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    UNIQUE (kind, reference)
);

CREATE INDEX needs_review_open ON needs_review (created_at) WHERE resolved_at IS NULL;

-- The processor

-- The processor's webhooks as the service received them: one row per event,
-- keyed by its webhook-id, so that the primary key decides which of two
-- deliveries of one event is the first (the other finds the row and changes
-- nothing), with no read before the insert. A row is written, with the job
-- that settles its operation, before the delivery is answered 2xx. status is
-- the state the event reports, when it names one of its kind's states (a
-- success the processor has not finished, say); NULL when it says only
-- whether the operation succeeded, and the kind's first final state of that
-- outcome is meant.
CREATE TABLE processor_events (
    id                  text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    type                text NOT NULL,
    downstream_key      text NOT NULL,
    resource_type       text,
    resource_id         text,
    processor_object_id text,
    succeeded           boolean NOT NULL,
    failure_code        text,
    failure_message     text,
    amount              bigint NOT NULL,
    currency            text,
    payload             bytea NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now(),
    result              text CHECK (result IN ('settled', 'agreed', 'contradiction', 'unknown_operation')),
    processed_at        timestamptz,
    status              text CONSTRAINT processor_events_status_check CHECK (status ~ '^[a-z]+(_[a-z]+)*$'),
    CHECK ((result IS NULL) = (processed_at IS NULL))
);

CREATE INDEX processor_events_processed ON processor_events (received_at) WHERE result IS NOT NULL;
-- The processor events not processed, for the age an alert watches.
CREATE INDEX processor_events_unprocessed ON processor_events (received_at) WHERE result IS NULL;

-- The processor's rate limit, shared by every worker (PROCESSOR_RATE_LIMIT,
-- gateway.Pace): one row per processor, the time of its next free turn, by
-- the database's clock. Each request to the processor moves it on by one
-- turn in an upsert that holds the row for the statement and its commit,
-- so two workers never take the same turn.
CREATE TABLE processor_pace (
    processor text PRIMARY KEY,
    next_turn timestamptz NOT NULL
);

-- Webhooks to tenants

-- A tenant's webhook endpoints: where its events are POSTed, signed. Every
-- change of an endpoint bumps its version: a 410 disables only the version
-- its attempt was sent to, never one the tenant has moved to a new URL or
-- enabled again since. failing_since starts a run of failed attempts, which
-- a 2xx ends; an endpoint failing for WEBHOOK_DISABLE_AFTER is disabled
-- ('failing'). last_success_at is its last 2xx, to the minute: written at
-- most once a minute, so that an endpoint's row is not a lock every attempt
-- to it waits for. A run of failures is over once a 2xx comes after its
-- start.
CREATE TABLE webhook_endpoints (
    id              text PRIMARY KEY CHECK (id LIKE 'we\_%'),
    tenant_id       text NOT NULL REFERENCES tenants (id),
    url             text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    enabled_events  text[] NOT NULL CHECK (cardinality(enabled_events) BETWEEN 1 AND 16),
    description     text CHECK (length(description) <= 1000),
    status          text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason text CHECK (disabled_reason IN ('by_tenant', 'gone', 'failing')),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    version         bigint NOT NULL DEFAULT 1,
    failing_since   timestamptz,
    last_success_at timestamptz,
    CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL))
);

CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

-- Signing secrets, encrypted with WEBHOOK_SECRETS_KEY (AES-256-GCM): never
-- stored in the clear. A rotated-out secret signs until expires_at.
CREATE TABLE webhook_endpoint_secrets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    ciphertext  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);

CREATE INDEX webhook_endpoint_secrets_endpoint ON webhook_endpoint_secrets (endpoint_id);
-- What the reaper prunes.
CREATE INDEX webhook_endpoint_secrets_expires ON webhook_endpoint_secrets (expires_at) WHERE expires_at IS NOT NULL;

-- One delivery per event and endpoint, written with its job in the
-- transaction that stages the event. A finishing transaction fans its
-- event out to the deliveries with its first read, before the event's own
-- insert, which goes with its COMMIT: a delivery's reference to its event is
-- checked at the commit (DEFERRABLE INITIALLY DEFERRED). Deleting an event a
-- delivery names still fails, at the commit.
--
-- A resend starts a new chain of attempts on the delivery; attempts count
-- within the chain, and only the chain's own last attempt may fail it. job
-- is the job that may make the delivery's attempts: the last one inserted
-- for it, written in the transaction that inserts it. A job of a worker
-- that died stays running until River rescues it, and by then a newer job
-- may have been inserted for its delivery (handed a place, or resent): the
-- older one finds it is not the delivery's job any more and ends, so that no
-- delivery is ever attempted by two jobs at once. NULL: any job may (no job
-- named yet). public_id is the id a tenant sees (random_id).
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL,
    endpoint_id  text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id     text NOT NULL REFERENCES events (id) DEFERRABLE INITIALLY DEFERRED,
    status       text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    -- squawk-ignore prefer-bigint-over-int -- a count of attempts at one delivery
    attempts     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    -- squawk-ignore prefer-bigint-over-int -- a count of resends of one delivery
    chain        integer NOT NULL DEFAULT 1,
    public_id    text NOT NULL DEFAULT random_id('whd_') UNIQUE,
    job          bigint,
    UNIQUE (event_id, endpoint_id)
);

CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id);
-- What the reaper prunes, oldest first, and the deliveries of an event it
-- prunes.
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- The delivery log: one row per attempt, public_id the id a tenant sees.
CREATE TABLE webhook_delivery_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id   text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      text NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- the number of an attempt at one delivery
    attempt       integer NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- an HTTP status
    status_code   integer,
    -- squawk-ignore prefer-bigint-over-int -- an attempt's duration in milliseconds (2^31 are 24 days)
    duration_ms   integer NOT NULL,
    error         text,
    next_retry_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    public_id     text NOT NULL DEFAULT random_id('wha_') UNIQUE
);

CREATE INDEX webhook_delivery_attempts_endpoint ON webhook_delivery_attempts (endpoint_id, id DESC);

-- The places: a tenant's webhook attempts in flight, one row while an
-- attempt is being made (or a place is handed to a delivery whose job has
-- not claimed it yet), so that an endpoint and a tenant each hold at most
-- their share of the delivery workers (WEBHOOK_ENDPOINT_IN_FLIGHT,
-- WEBHOOK_TENANT_IN_FLIGHT). A place stops counting at until.
--
-- worker is the worker making the attempt: its presence (database.Presence),
-- an advisory lock its session holds for life. A place whose worker's lock
-- is free belongs to a dead worker and is freed at the next look, not when
-- its until passes. NULL: a place handed to a delivery whose job has not
-- claimed it yet, freed by its until.
--
-- instance is the server the place was claimed on: its postmaster's start
-- time (pg_postmaster_start_time()), read as a name and never compared but
-- for equality. A place is judged by its worker's presence only on the
-- server it was claimed on: a failover or a restart cuts every presence,
-- and the workers take theirs back a few seconds apart, so a claim made
-- before belongs to a worker that may be alive, and holds until its time
-- runs out. NULL (not claimed yet): never judged so.
CREATE TABLE webhook_places (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    until       timestamptz NOT NULL,
    -- squawk-ignore prefer-bigint-over-int -- a presence id, the int key of pg_advisory_lock(int, int)
    worker      integer,
    instance    timestamptz
);

CREATE INDEX webhook_places_endpoint ON webhook_places (endpoint_id);
CREATE INDEX webhook_places_tenant ON webhook_places (tenant_id);

-- The line: an endpoint's deliveries waiting for a place, oldest first. A
-- delivery in line has no job: the attempt that ends hands its place to the
-- oldest waiting for its endpoint, else to the oldest of its tenant whose
-- endpoint has room, and inserts that delivery's job in the transaction
-- that records it; a periodic sweep hands out the places that expired
-- instead (a dead worker's).
CREATE TABLE webhook_line (
    delivery_id bigint PRIMARY KEY REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id text NOT NULL,
    tenant_id   text NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_line_tenant ON webhook_line (tenant_id, since);
CREATE INDEX webhook_line_endpoint ON webhook_line (endpoint_id, since);

-- The delete guard

-- A tenant that still has rows is never deleted. The tables that carry
-- their tenant without a foreign key have no foreign key to refuse the
-- delete, and a tenant made again under the same id would inherit the rows.
-- This trigger refuses it as a foreign key would (SQLSTATE 23503, constraint
-- tenants_in_use): it looks in every table of the schema with a tenant_id
-- column and no foreign key to tenants on it, so a table a new kind adds is
-- covered with no edit here. It takes the tenant's write lock alone first
-- (tenant_writes). Deleting a tenant is rare and done by hand: the looks
-- into the tables with no index led by tenant_id (one would cost every
-- insert) scan.
-- +goose StatementBegin
CREATE FUNCTION refuse_tenant_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER tenants_in_use BEFORE DELETE ON tenants FOR EACH ROW EXECUTE FUNCTION refuse_tenant_in_use();

-- +goose Down
-- The schema is dropped whole, the service's rows with it; River's tables
-- are River's migrator's.
DROP TABLE webhook_line;
DROP TABLE webhook_places;
DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoint_secrets;
DROP TABLE webhook_endpoints;
DROP TABLE processor_pace;
DROP TABLE processor_events;
DROP TABLE needs_review;
DROP TABLE reconciliations;
DROP TABLE events;
DROP TABLE operation_outbox;
DROP TABLE refunds;
DROP TABLE payments;
DROP TABLE idempotency_keys;
DROP TABLE tenant_rates;
DROP TABLE api_keys;
DROP TABLE tenants;
DROP FUNCTION refuse_tenant_in_use();
DROP FUNCTION tenant_writes(text);
DROP FUNCTION holds_presence(integer, integer, text);
DROP FUNCTION random_id(text);
DROP FUNCTION refunds_count();
DROP FUNCTION refunds_rules();
DROP FUNCTION payments_rules();
DROP FUNCTION idempotency_keys_rules();
DROP FUNCTION operation_row_rules();
DROP FUNCTION currency_rules(text, text);
DROP FUNCTION operation_rules(text, bigint, text, text[], text);
DROP FUNCTION recovery_point_known(text);
DROP FUNCTION check_violation(text, text);
