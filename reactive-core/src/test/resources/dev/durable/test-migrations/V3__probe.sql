-- A version after the baseline, for MigratorIT only: what a release's V2 does to a table with rows.
ALTER TABLE durable_engines ADD COLUMN probe text NOT NULL DEFAULT 'added by V2';
