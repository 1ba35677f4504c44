-- Undo of version 8: the recorded step inputs and the fork links go with their tables.
DROP TABLE IF EXISTS durable_forks;
DROP TRIGGER IF EXISTS durable_step_input ON durable_instances;
DROP FUNCTION IF EXISTS durable_step_input();
DROP TABLE IF EXISTS durable_step_inputs;
