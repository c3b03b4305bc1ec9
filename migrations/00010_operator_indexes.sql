-- +goose Up
-- The worker's metrics read, at each scrape, the age of the oldest operation
-- still processing: a handful of rows, found by these partial indexes
-- without reading the settled ones.
CREATE INDEX payments_processing ON payments (created_at) WHERE status = 'processing';
CREATE INDEX refunds_processing ON refunds (created_at) WHERE status = 'processing';

-- +goose Down
DROP INDEX refunds_processing;
DROP INDEX payments_processing;
