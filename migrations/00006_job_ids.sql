-- +goose Up
-- Each operation names the River job that drives it, as River's InsertTx
-- returned it in the operation's first transaction, so that the sweep can
-- ask River (by job id, through its public API) whether that job will still
-- run. Operations from before this migration have none: a sweep that finds
-- one stuck hands it to the reconciler, which is always safe.
ALTER TABLE payments ADD COLUMN job_id bigint;
ALTER TABLE refunds ADD COLUMN job_id bigint;

-- +goose Down
ALTER TABLE refunds DROP COLUMN job_id;
ALTER TABLE payments DROP COLUMN job_id;
