-- Undo of the test-only V7.
ALTER TABLE durable_engines DROP COLUMN probe;
