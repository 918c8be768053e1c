-- hcp-workflow journal, Postgres schema v7: a step's append closer to a bare commit (issue 26 §3).
--
-- Measured with pgbench on the statement `append_statement` sends (one HOT update of the run
-- row and two event rows; `synchronous_commit = off` so that only execution shows):
-- 0.18 ms above a one-row insert before this migration, 0.08 ms after it.
--
-- 1. `hcp_ts` and `hcp_ms` lose STRICT. PostgreSQL inlines a SQL function only when inlining
--    cannot change its result; a STRICT function whose body (a CASE) is not itself strict is
--    never inlined, so every call ran through the SQL-function executor (about 0.03 ms each,
--    five or more per append: `updated_at`, `hcp_keep_due` and each event's `at`). The bodies
--    already return NULL for NULL (`to_timestamp(NULL)`, `extract(… FROM NULL)`), so the
--    results are the same.
-- 2. `events` loses its foreign key to `runs`. Runs are never deleted, so its ON DELETE
--    CASCADE never fired; what remained was a per-row trigger that locks the run row again
--    (about 0.05 ms per append). Every event is inserted by the statement that also updates
--    (fences) its run row, or by `create_run` in the run's own transaction: an event without
--    its run cannot be written.
CREATE OR REPLACE FUNCTION hcp_ts(ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
        SELECT CASE
            WHEN ms > 1000000000000000 THEN 'infinity'::timestamptz
            WHEN ms < -1000000000000000 THEN '-infinity'::timestamptz
            ELSE to_timestamp(ms::float8 / 1000)
        END
    $$;

CREATE OR REPLACE FUNCTION hcp_ms(ts timestamptz) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
        SELECT CASE
            WHEN ts = 'infinity'::timestamptz THEN 9223372036854775807
            WHEN ts = '-infinity'::timestamptz THEN -9223372036854775808
            ELSE (extract(epoch FROM ts) * 1000)::bigint
        END
    $$;

ALTER TABLE events DROP CONSTRAINT IF EXISTS events_run_id_fkey;
