-- Undo of version 5: claims are known by their worker and attempt alone again.
ALTER TABLE durable_instances DROP COLUMN IF EXISTS claim_xid;
