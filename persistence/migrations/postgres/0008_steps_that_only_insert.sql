-- hcp-workflow journal, Postgres schema v8: a step whose commit only inserts (issue 26 §3).
--
-- Measured with pgbench (execution only, `synchronous_commit = off`, 7 alternating rounds of
-- 3,000): the append of schema v7 (the run row's fenced HOT update, then the events) 0.236
-- ms; the events alone, fenced by a share lock on the run row and numbered by the writer,
-- 0.175 ms; a one-row insert 0.116 ms. A step whose run keeps its state and stays due (most
-- steps) now writes only its events, through `append_insert_only`:
--
-- 1. The summary a step changes ("blocked on", the current step and the time) rides on the
--    append's last event (`run_blocked_on`, `run_step`, `run_updated_at`). Views read the
--    run's newest event: if it carries a summary and is newer than the last one written to
--    the row (`summary_seq`), it wins over the row's columns.
-- 2. Seqs are the writer's (`Append::after_seq`), and the primary key `(run_id, seq)` refuses
--    a writer whose view is behind (an append already written, its answer lost; the store
--    answers `Fenced`). An append that changes the row still fences by lease epoch and
--    records in `summary_seq` the seq its summary is current at.
-- 3. `last_seq` is no longer written by this binary. The previous binary still allocates
--    seqs from it (`last_seq = last_seq + n`), and it may lease a run after this one wrote
--    events it never counted (a rolling upgrade): the trigger below makes its allocation
--    start from the journal's real last seq. It fires only on an UPDATE that names
--    `last_seq`, which this binary never sends.
ALTER TABLE events ADD COLUMN run_blocked_on text,
                   ADD COLUMN run_step text,
                   ADD COLUMN run_updated_at timestamptz;

ALTER TABLE runs ADD COLUMN summary_seq bigint;

CREATE FUNCTION hcp_last_seq_from_events() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.last_seq := (SELECT coalesce(max(seq), 0) FROM events WHERE run_id = NEW.id)
                    + (NEW.last_seq - OLD.last_seq);
    RETURN NEW;
END
$$;

CREATE TRIGGER runs_last_seq_from_events BEFORE UPDATE OF last_seq ON runs
    FOR EACH ROW EXECUTE FUNCTION hcp_last_seq_from_events();
