-- Undo of version 15: per-key caps go with their column; the cap gate's counters keep the capacity
-- they last had until a pick admits on them again at the queue's static cap.
ALTER TABLE durable_fair_keys DROP COLUMN IF EXISTS cap;
