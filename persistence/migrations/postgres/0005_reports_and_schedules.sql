-- hcp-workflow journal, Postgres schema v5: reports beside runs, and durable schedules.
--
-- `reports` keeps what a read-only check found (issue 25: each `verify` of a cluster, its
-- rows as JSON text the store never reads), newest first per (kind, subject). Inserting one
-- prunes that subject's reports beyond the newest `keep` in the same statement.
--
-- `schedules` holds one row per recurring job (`verify/<cluster>`): when it is next due.
-- Claiming is one `INSERT … ON CONFLICT DO UPDATE … WHERE next_at <= now`: the row lock
-- serialises claimants, and the second finds the slot no longer due, so of any number of
-- workers exactly one gets a due slot.
CREATE TABLE reports (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    subject text NOT NULL,
    at timestamptz NOT NULL,
    ok boolean NOT NULL,
    made_by text NOT NULL,
    data text NOT NULL
);
CREATE INDEX reports_subject ON reports (kind, subject, id);

CREATE TABLE schedules (
    key text PRIMARY KEY,
    next_at timestamptz NOT NULL,
    claimed_by text NOT NULL,
    claimed_at timestamptz NOT NULL
);
