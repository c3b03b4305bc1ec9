-- +goose Up
-- squawk-ignore-file
ALTER TABLE refunds ADD COLUMN currency text NOT NULL, ADD COLUMN failure_message text;

-- +goose StatementBegin
CREATE FUNCTION refunds_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE payments SET amount_refunded = amount_refunded + CASE WHEN NEW.status = 'succeeded' THEN NEW.amount ELSE -NEW.amount END,
        updated_at = now()
    WHERE id = NEW.payment_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER counted AFTER UPDATE OF status ON refunds FOR EACH ROW
    WHEN ((OLD.status = 'succeeded') <> (NEW.status = 'succeeded'))
    EXECUTE FUNCTION refunds_count();

CREATE OR REPLACE FUNCTION recovery_point_known(point text) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN point IN ('started', 'finished', 'expired') OR point ~ '^[a-z]+(_[a-z]+)*_created$';
ALTER TABLE reconciliations DROP CONSTRAINT reconciliations_resource_type_check;
ALTER TABLE reconciliations ADD CONSTRAINT reconciliations_resource_type_check CHECK (resource_type ~ '^[a-z]+(_[a-z]+)*$');

-- +goose Down
SELECT 1;
