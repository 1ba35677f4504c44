-- Undo of version 6: waiting follow-ups are dropped with their column.
DROP TRIGGER IF EXISTS durable_follow_up_settled ON durable_instances;
DROP TRIGGER IF EXISTS durable_follow_up_moved ON durable_instances;
DROP FUNCTION IF EXISTS durable_follow_up();
ALTER TABLE durable_instances DROP COLUMN IF EXISTS follow_up, DROP COLUMN IF EXISTS debounce_until;
