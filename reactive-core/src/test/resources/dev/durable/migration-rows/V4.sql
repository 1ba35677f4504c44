-- Rows a deployment at version 4 leaves behind in the tables version 4 made, for MigratorIT: a
-- minute of activity of queue 'upgraded' an hour ago, and a shared secret.
INSERT INTO durable_queue_minutes (minute, queue, completed, failed, retried, cancelled, reaped)
VALUES (date_trunc('minute', now() - interval '1 hour'), 'upgraded', 12, 1, 2, 0, 1);
INSERT INTO durable_shared_secrets (name, secret) VALUES ('upgraded', '\x00112233445566778899aabbccddeeff');
