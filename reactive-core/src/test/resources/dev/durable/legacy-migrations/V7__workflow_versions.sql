-- Durable schema, version 7: versioned workflows with state migrations.

-- The oldest version of each type an engine runs (parallel to types and versions): a workflow with
-- state migrations runs [lowest, version]; rows below have no migration path, and the registry
-- reports them as unserved work. Null (engines before this version) means every version down to 1.
ALTER TABLE durable_engines ADD COLUMN lowest_versions integer[];
