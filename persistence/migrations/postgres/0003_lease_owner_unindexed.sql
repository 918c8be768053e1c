-- hcp-workflow journal, Postgres schema v3: leasing changes no indexed column.
--
-- `acquire` writes `lease_owner`, `lease_epoch` and `lease_expires_at` of every run it
-- takes. With `lease_owner` indexed, none of those updates could be HOT: each one wrote a
-- new entry into all eight indexes of `runs`, and a worker taking over thousands of runs
-- spent most of its time there. The index only served `renew` and `runs_with_commands`,
-- which now look among the unfinished runs (the `runs_due` and `runs_commands_pending`
-- partial indexes), so finished runs, however many, are never read by them.
DROP INDEX runs_lease_owner;
