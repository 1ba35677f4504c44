-- Undo of version 2.
DROP TABLE IF EXISTS durable_engines;
