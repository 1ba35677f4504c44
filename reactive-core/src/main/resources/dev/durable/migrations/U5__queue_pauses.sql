-- Undo of version 5.
DROP TABLE IF EXISTS durable_queue_pauses;
