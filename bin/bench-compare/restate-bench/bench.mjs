// The bench-compare workload on Restate (../README.md): RUNS invocations, one at a time
// (CONCURRENCY at once), of a handler that runs STEPS no-op `ctx.run` steps in sequence.
//
//   node bench.mjs --runs 50 --steps 10 --concurrency 1 --dir /tmp/restate-data
//
// Starts `restate-server` (the npm package's binary, default configuration: one node, the
// replicated loglet with replication 1, RocksDB WAL with fsync) on random free ports with
// a fresh base directory, serves the handler from this process, registers it, runs the
// invocations through the HTTP ingress, stops the server, and prints one JSON line.
//
// p50/p99_ms_per_step: the interval between the entries of consecutive `ctx.run` bodies of
// one invocation (step k's result journaled and acknowledged, step k+1 started), the same
// quantity the other programs report. e2e: (response − request) / STEPS per invocation.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

// The SDK needs `Promise.withResolvers` (Node.js 22); this machine's Node.js is 20.
if (!Promise.withResolvers) {
  Promise.withResolvers = function () {
    let resolve;
    let reject;
    const promise = new this((a, b) => {
      resolve = a;
      reject = b;
    });
    return { promise, resolve, reject };
  };
}
// The SDK logs to stdout; only this program's JSON line should be there.
process.env.RESTATE_LOGGING ??= "ERROR";
const restate = await import("@restatedev/restate-sdk");

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const RUNS = Number(arg("runs", 50));
const STEPS = Number(arg("steps", 10));
const CONCURRENCY = Number(arg("concurrency", 1));
const DIR = arg("dir", path.join(os.tmpdir(), `restate-bench-${process.pid}`));

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Entry times of each invocation's step bodies, by invocation key.
const stamps = new Map();
const bench = restate.service({
  name: "bench",
  handlers: {
    run: async (ctx, key) => {
      for (let k = 0; k < STEPS; k++) {
        await ctx.run(`step-${k}`, () => {
          const t = performance.now();
          if (!stamps.has(key)) stamps.set(key, []);
          stamps.get(key).push(t);
          return k;
        });
      }
      return STEPS;
    },
  },
});

const [ingress, admin, node, service] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
rmSync(DIR, { recursive: true, force: true });
mkdirSync(DIR, { recursive: true });
const config = path.join(DIR, "restate.toml");
writeFileSync(
  config,
  [
    `node-name = "bench"`,
    `advertised-address = "http://127.0.0.1:${node}/"`,
    `bind-address = "127.0.0.1:${node}"`,
    `[ingress]`,
    `bind-address = "127.0.0.1:${ingress}"`,
    `[admin]`,
    `bind-address = "127.0.0.1:${admin}"`,
    "",
  ].join("\n"),
);
const require = createRequire(import.meta.url);
const server = path.join(path.dirname(require.resolve("@restatedev/restate-server-linux-x64/package.json")), "bin", "restate-server");
const proc = spawn(server, ["--config-file", config, "--base-dir", path.join(DIR, "data"), "--no-logo", "--listen-mode", "tcp"], {
  stdio: ["ignore", "ignore", "pipe"],
});
let stderr = "";
proc.stderr.on("data", (d) => {
  stderr = (stderr + d).slice(-4000);
});
const fail = (msg) => {
  proc.kill("SIGKILL");
  console.error(`${msg}\n${stderr}`);
  process.exit(1);
};

await restate.serve({ services: [bench], port: service });

// Wait for the admin API, then register the handler's endpoint.
for (let i = 0; ; i++) {
  try {
    const r = await fetch(`http://127.0.0.1:${admin}/health`);
    if (r.ok) break;
  } catch {}
  if (i > 600) fail("restate-server's admin API never answered");
  await sleep(100);
}
const reg = await fetch(`http://127.0.0.1:${admin}/deployments`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ uri: `http://127.0.0.1:${service}` }),
});
if (!reg.ok) fail(`registration: ${reg.status} ${await reg.text()}`);
// The ingress answers once the new deployment has reached it.
for (let i = 0; ; i++) {
  const r = await fetch(`http://127.0.0.1:${ingress}/bench/run`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify("warm-up-probe"),
  }).catch(() => null);
  if (r && r.ok) break;
  if (i > 300) fail(`the ingress never served bench/run: ${r && r.status}`);
  await sleep(100);
}
stamps.clear();

const e2e = [];
let next = 0;
const started = performance.now();
const worker = async () => {
  for (;;) {
    const i = next++;
    if (i >= RUNS) return;
    const t0 = performance.now();
    const r = await fetch(`http://127.0.0.1:${ingress}/bench/run`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(`run-${i}`),
    });
    if (!r.ok) fail(`run ${i}: ${r.status} ${await r.text()}`);
    await r.text();
    e2e.push((performance.now() - t0) / STEPS);
  }
};
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const wall = (performance.now() - started) / 1000;
proc.kill("SIGTERM");

const deltas = [];
for (const ts of stamps.values()) for (let k = 1; k < ts.length; k++) deltas.push(ts[k] - ts[k - 1]);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.round((s.length - 1) * p)] : null;
};
const round = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
console.log(
  JSON.stringify({
    bench: "restate",
    restate_server: "1.7.12",
    restate_sdk: "1.17.2",
    runs: RUNS,
    steps: STEPS,
    concurrency: CONCURRENCY,
    wall_s: round(wall),
    steps_per_s: round((RUNS * STEPS) / wall),
    p50_ms_per_step: round(pct(deltas, 0.5)),
    p99_ms_per_step: round(pct(deltas, 0.99)),
    e2e_p50_ms_per_step: round(pct(e2e, 0.5)),
    e2e_p99_ms_per_step: round(pct(e2e, 0.99)),
    samples: deltas.length,
  }),
);
await sleep(200);
process.exit(0);
