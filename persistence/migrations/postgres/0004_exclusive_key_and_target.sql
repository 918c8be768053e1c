-- hcp-workflow journal, Postgres schema v4: one unfinished run per cluster, and run targets.
--
-- `exclusive_key` names what a run works on exclusively (a cluster: subscription, name and
-- infra id). The partial unique index admits at most one run per key that is not terminal;
-- `failed` (parked) and `needs-operator` runs still hold the key. Two `create_run`s racing
-- for one key: the second INSERT waits for the first to commit, then conflicts (ON CONFLICT
-- DO NOTHING) and names the holder. Neither new column is written after creation, so leases
-- and appends stay HOT updates (schema v2, v3).
--
-- `target` names the world a run's steps talk to; `acquire` leases a run only to a worker
-- serving it.
ALTER TABLE runs ADD COLUMN exclusive_key text;
ALTER TABLE runs ADD COLUMN target text;

CREATE UNIQUE INDEX runs_exclusive ON runs (exclusive_key)
    WHERE exclusive_key IS NOT NULL AND state NOT IN ('succeeded', 'rolled-back', 'cancelled');
