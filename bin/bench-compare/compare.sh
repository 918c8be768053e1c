#!/usr/bin/env bash
# Side-by-side: the same N × M-step no-op workflow on hcp-workflow, DBOS, duroxide and Restate.
#
#   bin/bench-compare/compare.sh            # 50 sequential runs × 10 steps, every tool/backend
#   RUNS=200 CONCURRENCY=4 bin/bench-compare/compare.sh
#
# Installs what it needs (DBOS into bin/bench-compare/.venv, a virtualenv; the duroxide
# program is built into bin/bench-compare/duroxide-bench/target; Restate's server and SDK are
# `npm ci`-installed into bin/bench-compare/restate-bench/node_modules), builds hcp-workflow in
# release mode, runs every benchmark on a fresh database, then prints a table and one JSON
# line per result with ratios versus hcp-workflow on the same backend. See README.md.
#
# Environment (all optional):
#   RUNS=50 STEPS=10 CONCURRENCY=1     workload shape, the same for every tool
#   TOOLS="hcp dbos duroxide restate"  which tools to run
#   DBOS_SPEC="dbos==3.4.0"            what pip installs into the venv
#   DUROXIDE_POLL_MS=5                 the tuned duroxide run's dispatcher_min_poll_interval
#                                      (hcp-workflow's bench polls every 5 ms); a second
#                                      duroxide run always uses duroxide's default (100 ms)
#   PGHOST=127.0.0.1 PGPORT=5432 PGUSER=postgres
#   HCP_BIN=<repo>/target/release/hcp-workflow   BUILD_HCP=1 (0: use HCP_BIN as it is)
#   SKIP_INSTALL=0                     1: reuse the venv and the duroxide build as they are
#   RUN_TIMEOUT=300                    seconds per benchmark run
#   WORKDIR=$(mktemp -d)               SQLite files and logs; KEEP=1 keeps it and the PG DBs
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

RUNS=${RUNS:-50}
STEPS=${STEPS:-10}
CONCURRENCY=${CONCURRENCY:-1}
TOOLS=${TOOLS:-"hcp dbos duroxide restate"}
DBOS_SPEC=${DBOS_SPEC:-"dbos==3.4.0"}
DUROXIDE_POLL_MS=${DUROXIDE_POLL_MS:-5}
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
HCP_BIN=${HCP_BIN:-$ROOT/target/release/hcp-workflow}
BUILD_HCP=${BUILD_HCP:-1}
SKIP_INSTALL=${SKIP_INSTALL:-0}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
KEEP=${KEEP:-0}
WORKDIR=${WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")}
mkdir -p "$WORKDIR"

VENV=$HERE/.venv
PY=$VENV/bin/python
DUROXIDE_BIN=$HERE/duroxide-bench/target/release/duroxide-bench
RESULTS=$WORKDIR/results.jsonl
: >"$RESULTS"
PG_DBS=()

log() { printf '[compare] %s\n' "$*" >&2; }
has_tool() { [[ " $TOOLS " == *" $1 "* ]]; }

cleanup() {
    if [[ $KEEP == 1 ]]; then
        log "kept $WORKDIR and databases: ${PG_DBS[*]:-none}"
        return
    fi
    for db in "${PG_DBS[@]}"; do
        psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -qX -c "drop database if exists $db with (force)" \
            >/dev/null 2>&1 || true
    done
    rm -rf "$WORKDIR"
}
trap cleanup EXIT

# ---------------------------------------------------------------- installs and builds
if [[ $SKIP_INSTALL != 1 ]]; then
    if has_tool dbos; then
        [[ -x $PY ]] || { log "creating venv $VENV"; python3 -m venv "$VENV"; }
        log "pip install $DBOS_SPEC into $VENV"
        "$PY" -m pip install -q --disable-pip-version-check "$DBOS_SPEC" >&2
    fi
    if has_tool duroxide; then
        log "building duroxide-bench (standalone Cargo project, crates.io duroxide)"
        cargo build --release --quiet --manifest-path "$HERE/duroxide-bench/Cargo.toml" >&2
    fi
    if has_tool restate; then
        log "npm ci in restate-bench (@restatedev/restate-server and restate-sdk, pinned)"
        npm ci --no-audit --no-fund --prefix "$HERE/restate-bench" >&2
    fi
fi
if has_tool hcp && [[ $BUILD_HCP == 1 ]]; then
    log "building hcp-workflow (release)"
    (cd "$ROOT" && cargo build --release --quiet -p hcp-workflow) >&2
fi

# ---------------------------------------------------------------- helpers
new_pg_db() { # $1: tool tag → sets $db to a freshly created database (no subshell: PG_DBS must see it)
    db="bc_${1}_$(date +%s)_$$_${RANDOM}"
    PG_DBS+=("$db")
    psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -qX -v ON_ERROR_STOP=1 -c "create database $db" >/dev/null
}

# run_one TOOL BACKEND VARIANT -- command...   (appends one JSON line to $RESULTS)
run_one() {
    local tool=$1 backend=$2 variant=$3
    shift 4
    local tag="${tool}-${backend}${variant:+-$variant}"
    local out="$WORKDIR/$tag.out" err="$WORKDIR/$tag.err" rc=0
    log "running $tag: $*"
    local load_before
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    timeout "$RUN_TIMEOUT" "$@" >"$out" 2>"$err" || rc=$?
    "$PY_SUMMARY" - "$tool" "$backend" "$variant" "$rc" "$out" "$err" "$load_before" >>"$RESULTS" <<'EOF'
import json, sys
tool, backend, variant, rc, out, err, load = sys.argv[1:8]
lines = [l for l in open(out, errors="replace").read().splitlines() if l.startswith("{")]
errtext = open(err, errors="replace").read()
rec = {"tool": tool, "backend": backend}
if variant:
    rec["variant"] = variant
if rc == "0" and lines:
    rec.update(json.loads(lines[-1]))
    rec["ok"] = True
else:
    rec["ok"] = False
    tail = [l for l in errtext.splitlines() if l.strip()][-8:]
    rec["error"] = f"exit {rc}: " + " | ".join(tail) if tail else f"exit {rc}, no stderr"
rec["loadavg_1m_before"] = float(load)
if tool == "duroxide":
    rec["sqlite_busy_retries_logged"] = errtext.count("database is locked")
print(json.dumps(rec))
EOF
    tail -n 1 "$RESULTS" >&2
}

PY_SUMMARY=python3
[[ -x $PY ]] && PY_SUMMARY=$PY
COMMON=(--runs "$RUNS" --steps "$STEPS" --concurrency "$CONCURRENCY")

# ---------------------------------------------------------------- benchmarks
if has_tool hcp; then
    run_one hcp sqlite "" -- "$HCP_BIN" bench engine --database "sqlite://$WORKDIR/hcp.db" "${COMMON[@]}"
    new_pg_db hcp
    run_one hcp postgres "" -- "$HCP_BIN" bench engine \
        --database "postgres://$PGUSER@$PGHOST:$PGPORT/$db" "${COMMON[@]}"
fi
if has_tool dbos; then
    run_one dbos sqlite "" -- "$PY" "$HERE/dbos_bench.py" --url "sqlite:///$WORKDIR/dbos.sqlite" "${COMMON[@]}"
    new_pg_db dbos
    run_one dbos postgres "" -- "$PY" "$HERE/dbos_bench.py" \
        --url "postgresql://$PGUSER@$PGHOST:$PGPORT/$db" "${COMMON[@]}"
fi
if has_tool duroxide; then
    run_one duroxide sqlite "poll${DUROXIDE_POLL_MS}ms" -- "$DUROXIDE_BIN" \
        --db "$WORKDIR/duroxide-tuned.db" --poll-ms "$DUROXIDE_POLL_MS" "${COMMON[@]}"
    run_one duroxide sqlite "default" -- "$DUROXIDE_BIN" \
        --db "$WORKDIR/duroxide-default.db" --poll-ms 100 "${COMMON[@]}"
fi
if has_tool restate; then
    # Its own log and RocksDB under $WORKDIR/restate, fsynced; compared with hcp-workflow's
    # SQLite (the embedded, local-disk journal).
    run_one restate own-log "" -- node "$HERE/restate-bench/bench.mjs" --dir "$WORKDIR/restate" "${COMMON[@]}"
fi

# ---------------------------------------------------------------- table + JSON lines
"$PY_SUMMARY" - "$RESULTS" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = {r["backend"]: r for r in recs if r["tool"] == "hcp" and r.get("ok")}

def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None

for r in recs:
    # Restate keeps its own log: compared with hcp-workflow's embedded journal (SQLite).
    b = base.get("sqlite" if r["tool"] == "restate" else r["backend"])
    if r["tool"] != "hcp" and r.get("ok") and b:
        r["vs_hcp"] = {
            "p50_ms_per_step_ratio": ratio(r["p50_ms_per_step"], b["p50_ms_per_step"]),
            "p99_ms_per_step_ratio": ratio(r["p99_ms_per_step"], b["p99_ms_per_step"]),
            "steps_per_s_ratio": ratio(r["steps_per_s"], b["steps_per_s"]),
        }

def name(r):
    return r["tool"] + (f" ({r['variant']})" if r.get("variant") else "")

def fmt(x, d=2):
    return "-" if x is None else f"{x:.{d}f}"

hdr = f"{'tool':<24} {'backend':<9} {'p50 ms/step':>11} {'p99 ms/step':>11} {'steps/s':>9}   {'p50 x':>6} {'p99 x':>6} {'thru x':>6}  notes"
print()
print(f"shape: runs={recs[0].get('runs', '?') if recs else '?'} steps={recs[0].get('steps', '?') if recs else '?'} "
      f"concurrency={recs[0].get('concurrency', '?') if recs else '?'}; "
      "'x' columns = other / hcp-workflow on the same backend (ms/step: >1 is slower; thru: <1 is slower)")
print(hdr)
print("-" * len(hdr))
for r in recs:
    if not r.get("ok"):
        print(f"{name(r):<24} {r['backend']:<9} {'FAILED':>11}  {r.get('error', '')[:300]}")
        continue
    v = r.get("vs_hcp", {})
    notes = []
    if "sqlite_synchronous" in r:
        notes.append(f"{r['sqlite_journal_mode']}/{r['sqlite_synchronous']}")
    notes.append(f"load {r['loadavg_1m_before']}")
    if r.get("sqlite_busy_retries_logged"):
        notes.append(f"{r['sqlite_busy_retries_logged']} SQLITE_BUSY retries")
    for k in ("dbos_version",):
        if k in r:
            notes.append(f"dbos {r[k]}")
    if "duroxide_version" in r:
        notes.append(f"duroxide {r['duroxide_version']}")
    if "restate_server" in r:
        notes.append(f"restate-server {r['restate_server']}, sdk {r['restate_sdk']}; x vs hcp sqlite")
    print(f"{name(r):<24} {r['backend']:<9} {fmt(r['p50_ms_per_step'],3):>11} {fmt(r['p99_ms_per_step'],3):>11} "
          f"{fmt(r['steps_per_s'],1):>9}   {fmt(v.get('p50_ms_per_step_ratio')):>6} {fmt(v.get('p99_ms_per_step_ratio')):>6} "
          f"{fmt(v.get('steps_per_s_ratio')):>6}  {', '.join(notes)}")
print()
for r in recs:
    print(json.dumps(r, sort_keys=True))
EOF
