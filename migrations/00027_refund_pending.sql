-- +goose Up

-- A refund may wait: pending is a refund that a processor took and settles
-- only later, by its webhook. The rules every operation's row keeps take the
-- statuses of its own kind; a payment's stay processing, succeeded, failed.
-- Only functions change: no table is locked or read.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- +goose StatementBegin
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
CREATE OR REPLACE FUNCTION operation_rules(relation text, amount bigint, status text, settled_by text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(relation, amount, status, ARRAY['processing', 'succeeded', 'failed'], settled_by);
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION refunds_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(TG_TABLE_NAME, NEW.amount, NEW.status, ARRAY['processing', 'succeeded', 'failed', 'pending'], NEW.settled_by);
    IF NOT (NEW.reason IN ('duplicate', 'fraudulent', 'requested_by_customer')) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'refunds_reason_check');
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose Down
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION refunds_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM operation_rules(TG_TABLE_NAME, NEW.amount, NEW.status, NEW.settled_by);
    IF NOT (NEW.reason IN ('duplicate', 'fraudulent', 'requested_by_customer')) THEN
        PERFORM check_violation(TG_TABLE_NAME, 'refunds_reason_check');
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION operation_rules(relation text, amount bigint, status text, settled_by text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (amount BETWEEN 1 AND 99999999) THEN
        PERFORM check_violation(relation, relation || '_amount_check');
    END IF;
    IF NOT (status IN ('processing', 'succeeded', 'failed')) THEN
        PERFORM check_violation(relation, relation || '_status_check');
    END IF;
    IF NOT (settled_by IN ('worker', 'webhook', 'reconciler')) THEN
        PERFORM check_violation(relation, relation || '_settled_by_check');
    END IF;
END $$;
-- +goose StatementEnd

DROP FUNCTION operation_rules(text, bigint, text, text[], text);
