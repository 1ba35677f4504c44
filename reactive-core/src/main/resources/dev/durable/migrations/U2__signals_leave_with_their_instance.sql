-- Undo of version 2: the settling statements' own deletes are all version 1 has (the signals
-- version 2 collected stay collected).
DROP TRIGGER IF EXISTS durable_signals_forgotten ON durable_instances;
DROP FUNCTION IF EXISTS durable_signals_forget();
