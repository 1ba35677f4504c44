-- The version after the newest shipped one, for MigratorIT only: what a release's next version does to a table with rows.
ALTER TABLE durable_engines ADD COLUMN probe text NOT NULL DEFAULT 'added by V7';
