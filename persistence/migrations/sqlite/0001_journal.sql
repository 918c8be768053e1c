-- hcp-workflow journal, SQLite schema v1.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (the runtime's `Timestamp`),
-- run ids are hyphenated lowercase UUID TEXT (so their byte order is the UUID order the
-- in-memory store sorts by). Tables are STRICT so a wrong type is refused at write time.
-- Event `data` and the DAG are stored as the exact text the runtime gave us: the runtime
-- decodes them and decides what an undecodable row means (it parks that one run).

-- One row per run: the summary `list` shows, the lease, and the event counter.
-- Every append rewrites this row, so it deliberately holds nothing large (the DAG lives in
-- `run_dags`: SQLite rewrites a whole record, overflow pages included, on UPDATE).
CREATE TABLE runs (
    id               TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 36),
    workflow         TEXT    NOT NULL,
    workflow_version INTEGER NOT NULL CHECK (workflow_version BETWEEN 0 AND 4294967295),
    -- JSON object of string labels, as written by create_run (decoded on every read).
    labels           TEXT    NOT NULL DEFAULT '{}',
    idempotency_key  TEXT    UNIQUE,
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'waiting',
                         'unwinding', 'succeeded', 'rolled-back', 'needs-operator', 'failed',
                         'cancelled')),
    blocked_on       TEXT    NOT NULL,
    current_step     TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    wake_at          INTEGER,
    lease_owner      TEXT,
    lease_epoch      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    commands_pending INTEGER NOT NULL DEFAULT 0 CHECK (commands_pending IN (0, 1)),
    -- Seq of the last event appended: appends allocate seqs from here in the same UPDATE
    -- that checks the fence, so no MAX(seq) query is needed.
    last_seq         INTEGER NOT NULL DEFAULT 0
) STRICT;

-- `acquire`: due, non-terminal runs by wake time. Partial, so the thousands of finished runs
-- a long-lived journal accumulates are not even in the index. The predicate is spelled
-- exactly as the queries spell it (SQLite matches partial-index predicates term by term).
CREATE INDEX runs_due ON runs (wake_at)
    WHERE state NOT IN ('succeeded', 'rolled-back', 'cancelled');
-- `acquire`, second branch: runs woken by an operator command rather than by a timer.
CREATE INDEX runs_commands_pending ON runs (wake_at)
    WHERE commands_pending = 1 AND state NOT IN ('succeeded', 'rolled-back', 'cancelled');
-- `renew`, `runs_with_commands`, `claim_executor`: the leases one worker holds.
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;
-- `list_runs`: newest first, optionally by workflow or state.
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_workflow ON runs (workflow, created_at DESC);
CREATE INDEX runs_state ON runs (state, created_at DESC);

-- The serialized SagaDag, written once at creation.
CREATE TABLE run_dags (
    run_id TEXT NOT NULL PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    dag    TEXT NOT NULL
) STRICT;

-- `list_runs --label k=v`: labels exploded for an index lookup (the JSON copy in `runs`
-- is what reads return).
CREATE TABLE run_labels (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (key, value, run_id)
) STRICT, WITHOUT ROWID;

-- The journal. WITHOUT ROWID clusters a run's events by (run_id, seq): an append writes one
-- b-tree instead of a table plus an index, and `load_run` reads contiguous pages.
CREATE TABLE events (
    run_id TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL CHECK (seq >= 1),
    kind   TEXT    NOT NULL,
    node   TEXT,
    data   TEXT    NOT NULL,
    at     INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- Operator commands: a per-run inbox drained by the lease holder. Ids are global and
-- increasing (INTEGER PRIMARY KEY = rowid; rows are never deleted, so never reused).
CREATE TABLE commands (
    id           INTEGER NOT NULL PRIMARY KEY,
    run_id       TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    command      TEXT    NOT NULL,
    requested_by TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    requested_at INTEGER NOT NULL,
    applied_at   INTEGER
) STRICT;

CREATE INDEX commands_run ON commands (run_id, id);
