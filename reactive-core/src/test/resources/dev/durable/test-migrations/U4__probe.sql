-- Undo of the test-only V4.
ALTER TABLE durable_engines DROP COLUMN probe;
