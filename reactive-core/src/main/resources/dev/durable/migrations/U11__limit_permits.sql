-- Undo of version 11.
DROP TABLE IF EXISTS durable_window_counters;
DROP TABLE IF EXISTS durable_limit_permits;
