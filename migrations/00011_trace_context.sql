-- +goose Up
-- The trace of the operation a processor webhook event tells of: the W3C
-- traceparent of the processor's span that recorded it, sent with every
-- delivery of the event, so that the service's handling of the webhook
-- joins the operation's trace. NULL for events recorded without a trace.
ALTER TABLE processor.webhook_events ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE processor.webhook_events DROP COLUMN traceparent;
