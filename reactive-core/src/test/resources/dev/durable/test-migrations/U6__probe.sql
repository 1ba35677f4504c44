-- Undo of the test-only V6.
ALTER TABLE durable_engines DROP COLUMN probe;
