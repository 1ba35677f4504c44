-- Undo of version 6: executing rows are indexed again, and the ledger of claims goes.
CREATE INDEX IF NOT EXISTS durable_instances_executing_idx ON durable_instances (id) WHERE status = 'executing';
DROP INDEX IF EXISTS durable_instances_gated_executing_idx;
DROP TRIGGER IF EXISTS durable_claims_updated ON durable_instances;
DROP TRIGGER IF EXISTS durable_claims_inserted ON durable_instances;
DROP FUNCTION IF EXISTS durable_claims_record_updated();
DROP FUNCTION IF EXISTS durable_claims_record_inserted();
DROP TABLE IF EXISTS durable_claims;
