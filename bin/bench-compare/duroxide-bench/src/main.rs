//! duroxide side of `bin/bench-compare`: N orchestrations, each calling M no-op activities in
//! sequence, C orchestrations at a time, on duroxide's bundled SQLite provider.
//!
//! Prints one JSON line. Definitions match `hcp-workflow bench engine` as closely as the
//! public API allows:
//! - `p50_ms_per_step` / `p99_ms_per_step`: time between consecutive step executions of one
//!   orchestration (activity body k+1 entry minus activity body k entry). That interval covers
//!   the engine's whole per-step cycle: the activity result is persisted, an orchestration turn
//!   replays and schedules the next activity, and a worker dequeues it. M-1 samples per run.
//! - `steps_per_s`: runs × steps / wall time from the first start to the last completion.
//! - `e2e_*_ms_per_step`: per orchestration, (completion seen by the client − start) / steps.
//!
//! Usage: duroxide-bench --db /abs/path.db [--runs 50] [--steps 10] [--concurrency 1]
//!                       [--poll-ms 100] [--status-poll-ms 1]

use duroxide::providers::sqlite::SqliteProvider;
use duroxide::runtime::registry::ActivityRegistry;
use duroxide::runtime::{Runtime, RuntimeOptions};
use duroxide::{ActivityContext, Client, OrchestrationContext, OrchestrationRegistry, OrchestrationStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Args {
    db: String,
    runs: usize,
    steps: usize,
    concurrency: usize,
    poll_ms: u64,
    status_poll_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        db: String::new(),
        runs: 50,
        steps: 10,
        concurrency: 1,
        poll_ms: 100, // duroxide's RuntimeOptions default for dispatcher_min_poll_interval
        status_poll_ms: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "--db" => a.db = v,
            "--runs" => a.runs = num(&v)? as usize,
            "--steps" => a.steps = num(&v)? as usize,
            "--concurrency" => a.concurrency = num(&v)? as usize,
            "--poll-ms" => a.poll_ms = num(&v)?,
            "--status-poll-ms" => a.status_poll_ms = num(&v)?,
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if a.db.is_empty() {
        return Err("--db PATH is required".into());
    }
    if a.runs == 0 || a.steps == 0 || a.concurrency == 0 {
        return Err("--runs, --steps and --concurrency must be at least 1".into());
    }
    Ok(a)
}

/// Same rule as hcp-workflow's bench: index round((n-1)·p) of the sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[tokio::main]
async fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("duroxide-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(a).await {
        eprintln!("duroxide-bench: {e}");
        std::process::exit(1);
    }
}

async fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    // duroxide's runtime installs a stdout subscriber with `try_init` unless one exists;
    // ours sends its warnings (e.g. SQLITE_BUSY retries) to stderr instead.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    if std::path::Path::new(&a.db).exists() {
        return Err(format!("{} exists; the benchmark wants a fresh database", a.db).into());
    }
    std::fs::File::create(&a.db)?;
    let store = Arc::new(SqliteProvider::new(&format!("sqlite:{}", a.db), None).await?);

    // What the provider actually configured on its connections (for the README's caveats).
    let pool = store.get_pool();
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(pool).await?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(pool).await?;
    let synchronous = match synchronous {
        0 => "OFF",
        1 => "NORMAL",
        2 => "FULL",
        3 => "EXTRA",
        _ => "?",
    };

    // stamps[run] = entry time of each activity execution of that run, in order.
    let stamps: Arc<Vec<Mutex<Vec<Instant>>>> =
        Arc::new((0..a.runs).map(|_| Mutex::new(Vec::with_capacity(a.steps))).collect());

    let st = stamps.clone();
    let activities = ActivityRegistry::builder()
        .register("Noop", move |_ctx: ActivityContext, input: String| {
            let st = st.clone();
            async move {
                let now = Instant::now();
                let idx: usize = input.parse().map_err(|e| format!("bad input {input}: {e}"))?;
                if let Some(m) = st.get(idx) {
                    m.lock().map_err(|e| e.to_string())?.push(now);
                }
                Ok(input)
            }
        })
        .build();

    let steps = a.steps;
    let orchestrations = OrchestrationRegistry::builder()
        .register("NoopChain", move |ctx: OrchestrationContext, input: String| async move {
            for _ in 0..steps {
                ctx.schedule_activity("Noop", input.clone()).await?;
            }
            Ok(input)
        })
        .build();

    let options = RuntimeOptions {
        dispatcher_min_poll_interval: Duration::from_millis(a.poll_ms),
        ..RuntimeOptions::default()
    };
    let orch_conc = options.orchestration_concurrency;
    let worker_conc = options.worker_concurrency;
    let rt = Runtime::start_with_options(store.clone(), activities, orchestrations, options).await;
    let client = Arc::new(Client::new(store.clone()));

    let next = Arc::new(AtomicUsize::new(0));
    let e2e: Arc<Mutex<Vec<f64>>> = Arc::new(Mutex::new(Vec::with_capacity(a.runs)));
    let status_poll = Duration::from_millis(a.status_poll_ms);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.concurrency.min(a.runs) {
        let (client, next, e2e) = (client.clone(), next.clone(), e2e.clone());
        let (runs, steps) = (a.runs, a.steps);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= runs {
                    return Ok::<(), String>(());
                }
                let id = format!("bench-{i}");
                let started = Instant::now();
                client
                    .start_orchestration(&id, "NoopChain", i.to_string())
                    .await
                    .map_err(|e| format!("start {id}: {e:?}"))?;
                // Our own tight status poll: Client::wait_for_orchestration backs off
                // 5→10→…→100 ms, which would add up to 100 ms per orchestration.
                loop {
                    match client.get_orchestration_status(&id).await {
                        Ok(OrchestrationStatus::Completed { .. }) => break,
                        Ok(OrchestrationStatus::Failed { details, .. }) => {
                            return Err(format!("{id} failed: {}", details.display_message()));
                        }
                        Ok(_) => tokio::time::sleep(status_poll).await,
                        Err(e) => return Err(format!("status {id}: {e:?}")),
                    }
                }
                let ms = started.elapsed().as_secs_f64() * 1e3 / steps as f64;
                e2e.lock().map_err(|e| e.to_string())?.push(ms);
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let wall = t0.elapsed().as_secs_f64();
    rt.shutdown(Some(2000)).await;

    let mut deltas = Vec::with_capacity(a.runs * a.steps);
    for (i, m) in stamps.iter().enumerate() {
        let v = m.lock().map_err(|e| e.to_string())?;
        if v.len() != a.steps {
            return Err(format!("run {i}: {} activity executions, expected {}", v.len(), a.steps).into());
        }
        deltas.extend(v.windows(2).map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e3));
    }
    deltas.sort_by(f64::total_cmp);
    let mut e2e = e2e.lock().map_err(|e| e.to_string())?.clone();
    e2e.sort_by(f64::total_cmp);
    let total_steps = (a.runs * a.steps) as f64;
    println!(
        "{}",
        serde_json::json!({
            "bench": "duroxide", "backend": "sqlite", "duroxide_version": "0.1.32",
            "runs": a.runs, "steps": a.steps, "concurrency": a.concurrency,
            "dispatcher_min_poll_interval_ms": a.poll_ms,
            "orchestration_concurrency": orch_conc, "worker_concurrency": worker_conc,
            "sqlite_journal_mode": journal_mode, "sqlite_synchronous": synchronous,
            "wall_s": round3(wall),
            "steps_per_s": round3(total_steps / wall),
            "p50_ms_per_step": round3(percentile(&deltas, 0.50)),
            "p99_ms_per_step": round3(percentile(&deltas, 0.99)),
            "samples": deltas.len(),
            "e2e_p50_ms_per_step": round3(percentile(&e2e, 0.50)),
            "e2e_p99_ms_per_step": round3(percentile(&e2e, 0.99)),
        })
    );
    Ok(())
}
