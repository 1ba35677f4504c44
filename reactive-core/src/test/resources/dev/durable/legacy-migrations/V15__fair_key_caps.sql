-- Durable schema, version 15: per-key caps of a fair queue given by the application's function.
--
-- cap: the most claims of the key that may execute at once across the fleet, as the queue's cap
-- function last answered for it (Fairness.Builder#maxExecutingPerKey(Function)); 0 when it gave no
-- cap (the queue's static cap holds); null until an engine asked it (the fair pick then holds the
-- key to one claim on a queue capped by a function, and tells its engine to ask). The engine stores
-- it with the key's weight, and the fair pick admits the key's rows on the cap gate
-- ('fairness.' || queue, keyed by the fairness key) at this capacity. Nullable without a default:
-- adding it rewrites nothing.
ALTER TABLE durable_fair_keys ADD COLUMN cap integer CHECK (cap >= 0);
