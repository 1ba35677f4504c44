-- Undo of the test-only V5.
ALTER TABLE durable_engines DROP COLUMN probe;
