#!/usr/bin/env bash
# Drops the databases the test suites make for themselves and leave behind: the end-to-end
# tests' `hcp_e2e_<uuid>` (tests/src/lib.rs `fresh_postgres_unmigrated`) and the PgBouncer
# conformance suite's `hcp_pgb_<uuid>` (persistence/tests/store/pgbouncer_conformance.rs). Only
# names of exactly that shape; run it when no test is running (`.ci/run` does, first).
#
#   .ci/drop-test-databases.sh postgres://postgres@127.0.0.1:5432/postgres
set -euo pipefail
url="${1:?usage: $0 POSTGRES_URL}"
n=0
while read -r db; do
  [ -n "$db" ] || continue
  psql -qX "$url" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null
  n=$((n + 1))
done < <(psql -qAtX "$url" -c "SELECT datname FROM pg_database WHERE datname ~ '^hcp_(e2e|pgb)_[0-9a-f]{32}$'")
echo "dropped $n test database(s) left by earlier runs"
