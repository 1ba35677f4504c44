-- Undo of version 4: the activity per minute and the shared secrets go (a dashboard without a
-- secret of its own then signs with a random one per process).
DROP TABLE IF EXISTS durable_shared_secrets;
DROP TABLE IF EXISTS durable_queue_minutes;
