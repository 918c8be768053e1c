#!/usr/bin/env bash
# A journal append's own cost on PostgreSQL (issue 26 §3): pgbench runs the statements a
# step's append sends, with literals, and, alternately, the single-row insert of
# `pg-floor.sh`, each ROUNDS times N transactions, and prints the medians:
#   - `step`: `append_insert_only` (persistence/src/postgres/mod.rs, schema v8), what a step
#     whose run keeps its state and stays due sends: two event rows, the last carrying the
#     summary, fenced by a share lock on the run row. pgbench keeps no counter between
#     transactions, so the seqs the driver would number are taken from the clock here;
#   - `values`: the same step with its events as a `VALUES` list instead of `unnest` of
#     arrays (measured, not adopted: BENCHMARKS.md, eighth session);
#   - `append`: `append_statement`, what an append that writes the run row sends (a state
#     change, the first append after an acquisition): the fenced update of the run row and
#     two event rows;
#   - `nolock`: `step` with its fence reading the run row without `FOR SHARE` (not a valid
#     step either: an acquisition would not wait for it); with `rows`, it separates the
#     lock's cost from the read's;
#   - `rows`: the step's two event rows alone, as a `VALUES` list with literal times and no
#     lease fence. Not a valid step (nothing checks the lease): it shows what the fence and
#     the arrays add to the rows themselves (BENCHMARKS.md, ninth session).
#
#   bin/bench/pg-append.sh postgres://postgres@127.0.0.1:5432/hb [N] [ROUNDS] [SYNC]
#
# The database must hold a journal (any `hcp-workflow --database <url> bench engine` leaves
# one). SYNC is `on` (default: each commit waits for its WAL flush, as the journal does) or
# `off` (only the statements' execution shows). Two probe runs are inserted and removed with
# their events afterwards; the probe table is dropped.
set -euo pipefail
url="${1:?usage: $0 POSTGRES_URL [N] [ROUNDS] [SYNC]}"
n="${2:-2000}"
rounds="${3:-5}"
sync="${4:-on}"
run=00000000-0000-0000-0000-00000000a99e
run2=00000000-0000-0000-0000-00000000a99d
dir="$(mktemp -d)"
cleanup() {
  psql -q "$url" -c "DELETE FROM events WHERE run_id IN ('$run', '$run2')" -c "DELETE FROM runs WHERE id IN ('$run', '$run2')" \
    -c "DROP TABLE IF EXISTS hcp_bench_pg_floor" >/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
psql -q "$url" -c "CREATE TABLE IF NOT EXISTS hcp_bench_pg_floor (id bigserial PRIMARY KEY, v text NOT NULL)" \
  -c "INSERT INTO runs (id, workflow, workflow_version, state, blocked_on, created_at, updated_at, lease_owner, lease_epoch)
      VALUES ('$run', 'bench.append', 1, 'running', '', now(), now(), 'bench', 1), ('$run2', 'bench.append', 1, 'running', '', now(), now(), 'bench', 1) ON CONFLICT DO NOTHING" >/dev/null
echo "INSERT INTO hcp_bench_pg_floor (v) VALUES ('probe');" > "$dir/floor.sql"
# pgbench reads `:name` as a variable: the event data below has no colon.
cat > "$dir/append.sql" <<SQL
WITH r AS (UPDATE runs SET state = 'running', blocked_on = '', current_step = 'bench.noop.3', wake_at = hcp_keep_due(wake_at, NULL, 1700000000000), updated_at = hcp_ts(1700000000000), summary_seq = coalesce((extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 2, (SELECT coalesce(max(seq), 0) FROM events WHERE run_id = '$run')) + 2 WHERE id = '$run' AND lease_owner = 'bench' AND lease_epoch = 1 RETURNING summary_seq), ins AS (INSERT INTO events (run_id, seq, kind, node, data, at) SELECT '$run', r.summary_seq - 2 + e.ord, e.kind, e.node, e.data, hcp_ts(e.at) FROM r, unnest(ARRAY['node_succeeded','node_started']::text[], ARRAY['bench.noop.2','bench.noop.3']::text[], ARRAY['{"attempt"=1,"output"=null,"ledger"=[]}','{"attempt"=1}']::text[], ARRAY[1700000000000,1700000000001]::int8[]) WITH ORDINALITY AS e(kind, node, data, at, ord)) SELECT summary_seq FROM r;
SQL
cat > "$dir/step.sql" <<SQL
INSERT INTO events (run_id, seq, kind, node, data, at, run_blocked_on, run_step, run_updated_at) SELECT '$run2', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 2 + e.ord, e.kind, e.node, e.data, hcp_ts(e.at), CASE WHEN e.ord = 2 THEN 'running bench.noop.3' END, CASE WHEN e.ord = 2 THEN 'bench.noop.3' END, CASE WHEN e.ord = 2 THEN hcp_ts(1700000000002) END FROM (SELECT 1 FROM runs WHERE id = '$run2' AND lease_owner = 'bench' AND lease_epoch = 1 FOR SHARE) AS fence, unnest(ARRAY['node_succeeded','node_started']::text[], ARRAY['bench.noop.2','bench.noop.3']::text[], ARRAY['{"attempt"=1,"output"=null,"ledger"=[]}','{"attempt"=1}']::text[], ARRAY[1700000000000,1700000000001]::int8[]) WITH ORDINALITY AS e(kind, node, data, at, ord);
SQL
cat > "$dir/values.sql" <<SQL
INSERT INTO events (run_id, seq, kind, node, data, at, run_blocked_on, run_step, run_updated_at) SELECT '$run2', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 2 + v.ord, v.kind, v.node, v.data, hcp_ts(v.at), v.b, v.s, hcp_ts(v.u) FROM (SELECT 1 FROM runs WHERE id = '$run2' AND lease_owner = 'bench' AND lease_epoch = 1 FOR SHARE) AS fence, (VALUES (1, 'node_succeeded'::text, 'bench.noop.2'::text, '{"attempt"=1,"output"=null,"ledger"=[]}'::text, 1700000000000::int8, NULL::text, NULL::text, NULL::int8), (2, 'node_started', 'bench.noop.3', '{"attempt"=1}', 1700000000001, 'running bench.noop.3', 'bench.noop.3', 1700000000002)) AS v(ord, kind, node, data, at, b, s, u);
SQL
sed 's/ FOR SHARE//' "$dir/step.sql" > "$dir/nolock.sql"
cat > "$dir/rows.sql" <<SQL
INSERT INTO events (run_id, seq, kind, node, data, at, run_blocked_on, run_step, run_updated_at) VALUES ('$run2', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 2 + 1, 'node_succeeded', 'bench.noop.2', '{"attempt"=1,"output"=null,"ledger"=[]}', '2023-11-14 22:13:20+00', NULL, NULL, NULL), ('$run2', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint * 2 + 2, 'node_started', 'bench.noop.3', '{"attempt"=1}', '2023-11-14 22:13:20.001+00', 'running bench.noop.3', 'bench.noop.3', '2023-11-14 22:13:20.002+00');
SQL
for _ in $(seq "$rounds"); do
  for s in floor step values append nolock rows; do
    PGOPTIONS="-c synchronous_commit=$sync" pgbench -n -c 1 -j 1 -t "$n" -M prepared -f "$dir/$s.sql" "$url" 2>/dev/null |
      awk -v s="$s" '/latency average/ {print s, $4}'
  done
done | python3 -c '
import sys, statistics
d = {}
for line in sys.stdin:
    k, v = line.split()
    d.setdefault(k, []).append(float(v))
f = statistics.median(d["floor"])
rounds = len(d["floor"])
print(f"synchronous_commit={sys.argv[1]}: one-row insert {f:.3f} ms (median of {rounds})")
for k, what in (("step", "insert-only step"), ("values", "insert-only step, events as VALUES"), ("append", "append writing the run row"), ("nolock", "the step, its fence without the share lock (not a valid step)"), ("rows", "the same two event rows, unfenced (not a valid step)")):
    a = statistics.median(d[k])
    per_round = statistics.median(x / y for x, y in zip(d[k], d["floor"]))
    print(f"  {what}: {a:.3f} ms, {a / f:.2f}x ({per_round:.2f}x median per round), {a - f:.3f} ms above")
' "$sync"
