-- Undo of version 8: the recorded step inputs and the fork links go with their tables, and the attempt
-- rows of replays and forks (no run of their own) with them: version 4 knows only retried and lease_lost.
DELETE FROM durable_attempts WHERE outcome NOT IN ('retried', 'lease_lost');
DROP TABLE IF EXISTS durable_forks;
DROP TRIGGER IF EXISTS durable_step_input ON durable_instances;
DROP FUNCTION IF EXISTS durable_step_input();
DROP TABLE IF EXISTS durable_step_inputs;
