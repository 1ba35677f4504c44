-- Durable schema, version 5: paused queues (DurableAdmin.pauseQueue / resumeQueue).
--
-- A queue listed here is paused on every engine: the pick's candidates exclude it (one probe of this
-- table's primary key per pick, in the pick statement itself, so a pause is obeyed by the next pick of
-- every engine), and each engine reads the list on its registry tick (every heartbeat interval) so that
-- claim-on-insert stops too. Running work finishes; nothing new starts until the queue is resumed.
CREATE TABLE durable_queue_pauses (
    queue      text        PRIMARY KEY,
    paused_at  timestamptz NOT NULL DEFAULT now(),
    -- The name of the engine whose admin paused it, for the operator's view.
    paused_by  text
);
