-- hcp-workflow journal, SQLite schema v3: reports beside runs, and durable schedules.
--
-- `reports` keeps what a read-only check found (issue 25: each `verify` of a cluster, its
-- rows as JSON text the store never reads), newest first per (kind, subject). Inserting one
-- prunes that subject's reports beyond the newest `keep` in the same transaction.
--
-- `schedules` holds one row per recurring job (`verify/<cluster>`): when it is next due.
-- Claiming a due slot is one conditional upsert inside the writer's IMMEDIATE transaction,
-- so of two processes sharing the file only one gets it; the due time survives restarts.
CREATE TABLE reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    at INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    made_by TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX reports_subject ON reports (kind, subject, id);

CREATE TABLE schedules (
    key TEXT PRIMARY KEY,
    next_at INTEGER NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at INTEGER NOT NULL
);
