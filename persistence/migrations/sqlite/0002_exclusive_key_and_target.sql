-- hcp-workflow journal, SQLite schema v2: one unfinished run per cluster, and run targets.
--
-- `exclusive_key` names what a run works on exclusively (a cluster: subscription, name and
-- infra id). The partial unique index admits at most one run per key that is not terminal
-- (succeeded, rolled-back, cancelled): `failed` (parked) and `needs-operator` runs still hold
-- the key, since their unwind may yet delete things. `create_run` checks the key inside the
-- writer's IMMEDIATE transaction; the index is what makes it true for every process.
--
-- `target` names the world a run's steps talk to (`azure/public`, `simulator/in-process`,
-- `simulator/http://…`): `acquire` leases a run only to a worker that serves its target, so
-- a worker pointed at the wrong world leaves it pending instead of failing it.
ALTER TABLE runs ADD COLUMN exclusive_key TEXT;
ALTER TABLE runs ADD COLUMN target TEXT;

CREATE UNIQUE INDEX runs_exclusive ON runs (exclusive_key)
    WHERE exclusive_key IS NOT NULL AND state NOT IN ('succeeded', 'rolled-back', 'cancelled');
