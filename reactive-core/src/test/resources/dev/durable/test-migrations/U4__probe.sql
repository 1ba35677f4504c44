-- Undo of the test-only V3.
ALTER TABLE durable_engines DROP COLUMN probe;
