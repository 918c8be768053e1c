-- hcp-workflow journal, SQLite schema v4: token buckets shared by every process on the
-- journal (issue 26: each ARM subscription's read, write and delete budget).
--
-- One row per bucket: its tokens when last touched, and when. Taking tokens refills the
-- row to now, then takes, in one statement inside the writer's IMMEDIATE transaction.
CREATE TABLE token_buckets (
    key TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    at INTEGER NOT NULL,
    granted INTEGER NOT NULL
);
