#!/usr/bin/env bash
# The durable single-row commit floor of a PostgreSQL server (issue 26), measured with
# pgbench (libpq, prepared statements: the fastest a client gets), to set beside
# `hcp-workflow bench engine --database postgres://…`, whose own `floor_p50_ms_per_commit`
# is the same write through sqlx, the driver hcp-workflow uses.
#
#   bin/bench/pg-floor.sh postgres://postgres@127.0.0.1:5432/hb [transactions]
#
# Prints pgbench's average latency per commit. The probe table is dropped afterwards.
set -euo pipefail
url="${1:?usage: $0 POSTGRES_URL [TRANSACTIONS]}"
n="${2:-2000}"
probe=hcp_bench_pg_floor
psql -q "$url" -c "CREATE TABLE IF NOT EXISTS $probe (id bigserial PRIMARY KEY, v text NOT NULL)"
trap 'psql -q "$url" -c "DROP TABLE IF EXISTS $probe"' EXIT
script="$(mktemp)"
echo "INSERT INTO $probe (v) VALUES ('probe');" > "$script"
pgbench -n -c 1 -j 1 -t "$n" -M prepared -f "$script" "$url" | grep -E 'latency average|tps'
rm -f "$script"
