-- hcp-workflow journal, Postgres schema v6: token buckets shared by every worker (issue 26:
-- each ARM subscription's read, write and delete budget).
--
-- One row per bucket: its tokens when last touched, and when, by the database's clock
-- (`clock_timestamp()`), so workers whose clocks disagree share one bucket correctly.
-- Taking is one upsert (refill to now, take up to what was asked, keep the grant in the
-- row for RETURNING): one round trip per batch of tokens, the row lock serialising workers.
CREATE TABLE token_buckets (
    key text PRIMARY KEY,
    tokens double precision NOT NULL,
    at timestamptz NOT NULL,
    granted integer NOT NULL
);
