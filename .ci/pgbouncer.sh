#!/usr/bin/env bash
# PgBouncer in transaction mode in front of the local PostgreSQL, for the pooled-Postgres
# tests (issue 27 §7). Debian 12's own pgbouncer (1.18) cannot carry sqlx's protocol-level
# prepared statements in transaction mode (that needs 1.21+ with `max_prepared_statements`),
# so this builds Debian's current pgbouncer (trixie's source package, Debian's patches
# applied) on this Debian 12 machine, once per target directory, and starts it on
# 127.0.0.1:6432. Prints the pooler's URL on stdout.
#
# usage: .ci/pgbouncer.sh <work dir>
set -euo pipefail
WORK="$1"
# The first free port from 6432 on (a pooler another run left behind keeps its own).
PORT=""
for p in $(seq 6432 6452); do
  if ! (echo > "/dev/tcp/127.0.0.1/$p") 2>/dev/null; then PORT=$p; break; fi
done
[ -n "$PORT" ] || { echo "no free port for PgBouncer in 6432-6452" >&2; exit 1; }
mkdir -p "$WORK"
BIN="$WORK/install/bin/pgbouncer"

if [ ! -x "$BIN" ]; then
  echo "building Debian's pgbouncer (trixie source package) into $WORK" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libevent-dev libc-ares-dev libssl-dev pkg-config dpkg-dev >/dev/null
  cat > "$WORK/trixie-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  APT_OPTS=(-o "Dir::Etc::sourcelist=$WORK/trixie-src.sources" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
  apt-get update -qq "${APT_OPTS[@]}" >&2
  rm -rf "$WORK/src" && mkdir -p "$WORK/src"
  (cd "$WORK/src" && apt-get source -qq --download-only "${APT_OPTS[@]}" pgbouncer >&2 \
    && dpkg-source -x pgbouncer_*.dsc pgbouncer >/dev/null)
  (cd "$WORK/src/pgbouncer" && ./configure --prefix="$WORK/install" --without-pam --without-systemd >/dev/null \
    && make -j2 >/dev/null && make install >/dev/null)
fi

RUN="$WORK/run"
mkdir -p "$RUN"
cat > "$RUN/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $RUN/userlist.txt
pool_mode = transaction
max_prepared_statements = 200
max_client_conn = 1000
; Every test database is a pool of its own: keep few server connections, close idle ones
; soon, and cap the pooler's share of the server's 100 so the other Postgres tests running
; beside it still get theirs.
default_pool_size = 4
max_user_connections = 30
server_idle_timeout = 2
ignore_startup_parameters = extra_float_digits,options
logfile = $RUN/pgbouncer.log
pidfile = $RUN/pgbouncer.pid
user = postgres
INI
echo '"postgres" ""' > "$RUN/userlist.txt"
chown -R postgres "$RUN" 2>/dev/null || true

if [ -f "$RUN/pgbouncer.pid" ] && kill -0 "$(cat "$RUN/pgbouncer.pid")" 2>/dev/null; then
  kill "$(cat "$RUN/pgbouncer.pid")" || true
  sleep 1
fi
# A pooler killed without a chance to clean up leaves its pidfile, and PgBouncer refuses to
# start beside one ("pidfile exists, another instance running?").
rm -f "$RUN/pgbouncer.pid"
"$BIN" -d "$RUN/pgbouncer.ini" >&2
for _ in $(seq 1 30); do
  pg_isready -h 127.0.0.1 -p "$PORT" -q 2>/dev/null && break
  sleep 0.5
done
if ! pg_isready -h 127.0.0.1 -p "$PORT" -q 2>/dev/null; then
  echo "PgBouncer did not come up on port $PORT:" >&2
  tail -n 20 "$RUN/pgbouncer.log" >&2 || true
  exit 1
fi
"$BIN" --version | head -n 1 >&2
echo "postgres://postgres@127.0.0.1:$PORT/postgres"
