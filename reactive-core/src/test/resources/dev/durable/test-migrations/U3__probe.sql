-- Undo of the test-only V2.
ALTER TABLE durable_engines DROP COLUMN probe;
