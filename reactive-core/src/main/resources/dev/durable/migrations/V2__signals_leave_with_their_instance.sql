-- Durable's schema, version 2: an instance's signals leave with it, whatever the snapshot of the
-- statement that deletes it.
--
-- Version 1 deleted a settling instance's signals in the settling statement itself, with that
-- statement's snapshot. A delivery that locked the row first and committed while the settle waited
-- for the lock stored a signal the settle's snapshot could not see: the settle then moved the row
-- (it re-reads a row it waited for) and left the signal behind, in an inbox nobody has any more. A
-- trigger's statement takes a snapshot of its own when it runs, after the settle's wait, so it sees
-- every signal committed before the row went. Only rows that ever had a signal fire it (a plain job
-- pays the WHEN clause), and every path that deletes a live row goes through it: a settle, the
-- collector, the admin's delete.

-- What the race left under version 1: signals whose instance is gone. First, before the trigger
-- locks the hot table against writes until this migration commits; what a version-1 settle leaves
-- in between, the collector's sweep finds.
DELETE FROM durable_signals s
 WHERE NOT EXISTS (SELECT 1 FROM durable_instances i WHERE i.id = s.instance_id);

CREATE FUNCTION durable_signals_forget() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM durable_signals WHERE instance_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER durable_signals_forgotten
    AFTER DELETE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.has_signals)
    EXECUTE FUNCTION durable_signals_forget();
