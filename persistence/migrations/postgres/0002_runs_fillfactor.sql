-- hcp-workflow journal, Postgres schema v2: room for HOT updates of `runs`.
--
-- Lease renewals (`lease_expires_at`) and most appends (`blocked_on`, `updated_at`,
-- `last_seq`; `state` and `wake_at` unchanged while a run is running and due) change no
-- indexed column. Postgres can then write the new row version on the same page without
-- touching any of the table's eight indexes (a HOT update), but only if the page has room:
-- at the default fillfactor of 100 it never does. 70 leaves that room on every page.
-- Existing pages get it as they are rewritten; new ones at once.
ALTER TABLE runs SET (fillfactor = 70);

-- The `wake_at` an append writes. A running run is due "now" after every append, so its
-- `wake_at` would change every time and no append could be HOT. Due now or due since
-- earlier is the same to `acquire` (both are `<= now`), so a run already due keeps its
-- older wake time; any other value (a future timer, NULL) is written as given.
CREATE FUNCTION hcp_keep_due(old timestamptz, new_ms bigint, now_ms bigint)
    RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN new_ms IS NOT NULL AND new_ms <= now_ms AND old IS NOT NULL
                     AND old <= hcp_ts(now_ms)
                THEN old ELSE hcp_ts(new_ms) END
$$;
