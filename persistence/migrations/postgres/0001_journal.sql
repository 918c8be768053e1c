-- hcp-workflow journal, PostgreSQL schema v1.
--
-- Native types: uuid ids, timestamptz times, bigint counters. The runtime speaks
-- milliseconds since the Unix epoch; `hcp_ts`/`hcp_ms` convert in SQL so the Rust side needs
-- no date library. Event `data` and the DAG are TEXT, not jsonb: they must come back as the
-- exact text the runtime wrote (and a corrupt row must be representable and returned raw).
-- Labels are jsonb: only their key/value content matters, and `@>` with a GIN index serves
-- `list --label`.

-- Milliseconds since the epoch -> timestamptz. `to_timestamp(float8)` rounds to the
-- microsecond, which is exact for whole milliseconds far beyond any date we store. Values
-- outside +/-10^15 ms (about 31,700 years either side of 1970) map to +/-infinity rather than
-- failing with "timestamp out of range", so a saturated `Timestamp(i64::MAX)` ("never")
-- round-trips; `hcp_ms` maps infinity back to i64::MAX / i64::MIN.
CREATE FUNCTION hcp_ts(ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
        SELECT CASE
            WHEN ms > 1000000000000000 THEN 'infinity'::timestamptz
            WHEN ms < -1000000000000000 THEN '-infinity'::timestamptz
            ELSE to_timestamp(ms::float8 / 1000)
        END
    $$;

-- timestamptz -> milliseconds since the epoch (extract returns exact numeric).
CREATE FUNCTION hcp_ms(ts timestamptz) RETURNS bigint
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
        SELECT CASE
            WHEN ts = 'infinity'::timestamptz THEN 9223372036854775807
            WHEN ts = '-infinity'::timestamptz THEN -9223372036854775808
            ELSE (extract(epoch FROM ts) * 1000)::bigint
        END
    $$;

-- One row per run: summary, lease, event counter. The DAG lives in `run_dags` so the row
-- every append updates stays small.
CREATE TABLE runs (
    id               uuid        NOT NULL PRIMARY KEY,
    workflow         text        NOT NULL,
    workflow_version bigint      NOT NULL CHECK (workflow_version BETWEEN 0 AND 4294967295),
    labels           jsonb       NOT NULL DEFAULT '{}',
    idempotency_key  text        UNIQUE,
    state            text        NOT NULL CHECK (state IN ('pending', 'running', 'waiting',
                         'unwinding', 'succeeded', 'rolled-back', 'needs-operator', 'failed',
                         'cancelled')),
    blocked_on       text        NOT NULL,
    current_step     text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    wake_at          timestamptz,
    lease_owner      text,
    lease_epoch      bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    commands_pending boolean     NOT NULL DEFAULT false,
    -- Seq of the last event: appends allocate seqs from here in the fenced UPDATE.
    last_seq         bigint      NOT NULL DEFAULT 0
);

-- `acquire`: due, non-terminal runs by wake time; finished runs are not in the index.
CREATE INDEX runs_due ON runs (wake_at)
    WHERE state NOT IN ('succeeded', 'rolled-back', 'cancelled');
-- `acquire`: runs woken by an operator command.
CREATE INDEX runs_commands_pending ON runs (wake_at)
    WHERE commands_pending AND state NOT IN ('succeeded', 'rolled-back', 'cancelled');
-- `renew`, `runs_with_commands`.
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE lease_owner IS NOT NULL;
-- `list_runs`: newest first, by workflow, state or label.
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_workflow ON runs (workflow, created_at DESC);
CREATE INDEX runs_state ON runs (state, created_at DESC);
CREATE INDEX runs_labels ON runs USING gin (labels jsonb_path_ops);

CREATE TABLE run_dags (
    run_id uuid NOT NULL PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    dag    text NOT NULL
);

CREATE TABLE events (
    run_id uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    bigint      NOT NULL CHECK (seq >= 1),
    kind   text        NOT NULL,
    node   text,
    data   text        NOT NULL,
    at     timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE commands (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       uuid        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    command      text        NOT NULL,
    requested_by text        NOT NULL,
    reason       text        NOT NULL,
    requested_at timestamptz NOT NULL,
    applied_at   timestamptz
);

CREATE INDEX commands_run ON commands (run_id, id);

-- Wake-up hint for workers in other processes: a new run or a new command. Delivered at
-- commit (and only then), collapsed per transaction. Workers poll anyway; this only
-- shortens the wait.
CREATE FUNCTION hcp_notify_wake() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hcp_workflow_wake', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_notify_wake AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION hcp_notify_wake();
CREATE TRIGGER commands_notify_wake AFTER INSERT ON commands
    FOR EACH ROW EXECUTE FUNCTION hcp_notify_wake();
