-- Undo of version 7.
ALTER TABLE durable_engines DROP COLUMN IF EXISTS lowest_versions;
