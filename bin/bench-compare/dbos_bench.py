#!/usr/bin/env python3
"""DBOS side of bin/bench-compare: N workflows of M sequential no-op steps, C at a time.

Prints one JSON line. Definitions match `hcp-workflow bench engine` as closely as DBOS's
public API allows:
- p50_ms_per_step / p99_ms_per_step: time between consecutive step executions of one
  workflow (entry of step k+1's body minus entry of step k's body). That interval covers
  DBOS's per-step cycle: step k's output is written to operation_outputs, control returns
  to the workflow, and step k+1 checks for a recorded output before running. M-1 samples
  per workflow.
- steps_per_s: runs x steps / wall time from the first workflow start to the last return.
- e2e_*_ms_per_step: per workflow, (return of the workflow call - call) / steps; includes
  writing the workflow's status/inputs at start and its output at the end.

Usage: dbos_bench.py --url URL [--runs 50] [--steps 10] [--concurrency 1]
  URL: sqlite:///abs/path.sqlite  or  postgresql://postgres@127.0.0.1:5432/DBNAME
"""

import argparse
import importlib.metadata
import json
import os
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS, DBOSConfig

# stamps[i]: perf_counter() at the entry of each step body of workflow i, in order.
stamps: dict[int, list[float]] = {}
stamps_lock = threading.Lock()


@DBOS.step()
def noop_step(idx: int) -> int:
    now = time.perf_counter()
    with stamps_lock:
        stamps[idx].append(now)
    return idx


@DBOS.workflow()
def noop_chain(idx: int, steps: int) -> int:
    for _ in range(steps):
        noop_step(idx)
    return idx


def percentile(sorted_xs: list[float], p: float) -> float:
    """Same rule as hcp-workflow's bench: index round((n-1)*p) of the sorted samples."""
    if not sorted_xs:
        return 0.0
    i = int(round((len(sorted_xs) - 1) * p))
    return sorted_xs[min(i, len(sorted_xs) - 1)]


def r3(x: float) -> float:
    return round(x, 3)


def sqlite_settings(url: str) -> dict:
    """DBOS sets no journal_mode/synchronous PRAGMA on its SQLite connections (it sets
    isolation_level=IMMEDIATE, busy_timeout and foreign_keys), so what a plain sqlite3
    connection to the same file reports is what DBOS's connections run with."""
    path = url[len("sqlite:///"):]
    c = sqlite3.connect(path)
    try:
        jm = c.execute("PRAGMA journal_mode").fetchone()[0]
        sync = c.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        c.close()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "sqlite_journal_mode": jm,
        "sqlite_synchronous": names.get(sync, str(sync)),
        "sqlite_version": sqlite3.sqlite_version,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=1)
    a = ap.parse_args()
    if a.runs < 1 or a.steps < 1 or a.concurrency < 1:
        ap.error("--runs, --steps and --concurrency must be at least 1")
    if a.url.startswith("sqlite:///") and os.path.exists(a.url[len("sqlite:///"):]):
        ap.error(f"{a.url} exists; the benchmark wants a fresh database")

    config: DBOSConfig = {
        "name": "dbos-bench",
        "system_database_url": a.url,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()

    for i in range(a.runs):
        stamps[i] = []
    e2e: list[float] = []
    e2e_lock = threading.Lock()

    def one(i: int) -> None:
        t = time.perf_counter()
        out = noop_chain(i, a.steps)
        ms = (time.perf_counter() - t) * 1e3 / a.steps
        if out != i:
            raise RuntimeError(f"workflow {i} returned {out!r}")
        with e2e_lock:
            e2e.append(ms)

    t0 = time.perf_counter()
    if a.concurrency == 1:
        for i in range(a.runs):
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=a.concurrency) as ex:
            for f in [ex.submit(one, i) for i in range(a.runs)]:
                f.result()
    wall = time.perf_counter() - t0
    DBOS.destroy()

    deltas: list[float] = []
    for i in range(a.runs):
        s = stamps[i]
        if len(s) != a.steps:
            raise RuntimeError(f"workflow {i}: {len(s)} step executions, expected {a.steps}")
        deltas.extend((s[k + 1] - s[k]) * 1e3 for k in range(len(s) - 1))
    deltas.sort()
    e2e.sort()

    out = {
        "bench": "dbos",
        "backend": "sqlite" if a.url.startswith("sqlite") else "postgres",
        "dbos_version": importlib.metadata.version("dbos"),
        "python": sys.version.split()[0],
        "runs": a.runs,
        "steps": a.steps,
        "concurrency": a.concurrency,
        "wall_s": r3(wall),
        "steps_per_s": r3(a.runs * a.steps / wall),
        "p50_ms_per_step": r3(percentile(deltas, 0.50)),
        "p99_ms_per_step": r3(percentile(deltas, 0.99)),
        "samples": len(deltas),
        "e2e_p50_ms_per_step": r3(percentile(e2e, 0.50)),
        "e2e_p99_ms_per_step": r3(percentile(e2e, 0.99)),
    }
    if a.url.startswith("sqlite"):
        out.update(sqlite_settings(a.url))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
