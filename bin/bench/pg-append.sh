#!/usr/bin/env bash
# A journal append's own cost on PostgreSQL (issue 26 §3): pgbench runs the statement a
# step's append sends (`append_statement` in persistence/src/postgres/mod.rs, with literals:
# the fenced update of the run row and two event rows) and, alternately, the single-row
# insert of `pg-floor.sh`, each ROUNDS times N transactions, and prints the medians.
#
#   bin/bench/pg-append.sh postgres://postgres@127.0.0.1:5432/hb [N] [ROUNDS] [SYNC]
#
# The database must hold a journal (any `hcp-workflow --database <url> bench engine` leaves
# one). SYNC is `on` (default: each commit waits for its WAL flush, as the journal does) or
# `off` (only the statements' execution shows). A probe run is inserted and removed with its
# events afterwards; the probe table is dropped.
set -euo pipefail
url="${1:?usage: $0 POSTGRES_URL [N] [ROUNDS] [SYNC]}"
n="${2:-2000}"
rounds="${3:-5}"
sync="${4:-on}"
run=00000000-0000-0000-0000-00000000a99e
dir="$(mktemp -d)"
cleanup() {
  psql -q "$url" -c "DELETE FROM events WHERE run_id = '$run'" -c "DELETE FROM runs WHERE id = '$run'" \
    -c "DROP TABLE IF EXISTS hcp_bench_pg_floor" >/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
psql -q "$url" -c "CREATE TABLE IF NOT EXISTS hcp_bench_pg_floor (id bigserial PRIMARY KEY, v text NOT NULL)" \
  -c "INSERT INTO runs (id, workflow, workflow_version, state, blocked_on, created_at, updated_at, lease_owner, lease_epoch)
      VALUES ('$run', 'bench.append', 1, 'running', '', now(), now(), 'bench', 1) ON CONFLICT DO NOTHING" >/dev/null
echo "INSERT INTO hcp_bench_pg_floor (v) VALUES ('probe');" > "$dir/floor.sql"
# pgbench reads `:name` as a variable: the event data below has no colon.
cat > "$dir/append.sql" <<SQL
WITH r AS (UPDATE runs SET state = 'running', blocked_on = '', current_step = 'bench.noop.3', wake_at = hcp_keep_due(wake_at, NULL, 1700000000000), updated_at = hcp_ts(1700000000000), last_seq = last_seq + 2 WHERE id = '$run' AND lease_owner = 'bench' AND lease_epoch = 1 RETURNING last_seq), ins AS (INSERT INTO events (run_id, seq, kind, node, data, at) SELECT '$run', r.last_seq - 2 + e.ord, e.kind, e.node, e.data, hcp_ts(e.at) FROM r, unnest(ARRAY['node_succeeded','node_started']::text[], ARRAY['bench.noop.2','bench.noop.3']::text[], ARRAY['{"attempt"=1,"output"=null,"ledger"=[]}','{"attempt"=1}']::text[], ARRAY[1700000000000,1700000000001]::int8[]) WITH ORDINALITY AS e(kind, node, data, at, ord)) SELECT last_seq FROM r;
SQL
for _ in $(seq "$rounds"); do
  for s in floor append; do
    PGOPTIONS="-c synchronous_commit=$sync" pgbench -n -c 1 -j 1 -t "$n" -M prepared -f "$dir/$s.sql" "$url" 2>/dev/null |
      awk -v s="$s" '/latency average/ {print s, $4}'
  done
done | python3 -c '
import sys, statistics
d = {}
for line in sys.stdin:
    k, v = line.split()
    d.setdefault(k, []).append(float(v))
f, a = statistics.median(d["floor"]), statistics.median(d["append"])
rounds = len(d["append"])
print(f"synchronous_commit={sys.argv[1]}: one-row insert {f:.3f} ms, append {a:.3f} ms (median of {rounds}): {a / f:.2f}x, {a - f:.3f} ms above")
' "$sync"
