//! WATCH: a newline-delimited JSON stream of `{"type","object"}` events.
//!
//! Without `resourceVersion` (or with "0") the stream starts with synthetic ADDED events for
//! the current objects; with one, it replays recorded events after it, or sends a 410
//! `Expired` ERROR event when that history is gone (as after a simulator restart), which
//! makes kube-rs watchers re-list. The stream ends after `timeoutSeconds`.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::Kind;
use super::api::Selectors;
use crate::http::Req;
use crate::sim::{Simulator, lock};
use crate::state::KubeEvent;

/// Longest watch the server keeps open when the client does not ask for less.
const MAX_WATCH: Duration = Duration::from_secs(1800);

/// Renders one event line (as JSON, or as a Table for `kubectl get -w`).
type Render = std::sync::Arc<dyn Fn(&str, &Value) -> Bytes + Send + Sync>;

fn line(etype: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": etype, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

pub(crate) fn watch(
    sim: &Simulator,
    req: &Req,
    kind: &'static Kind,
    ns: Option<String>,
) -> Response {
    let timeout = req
        .q("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(MAX_WATCH)
        .min(MAX_WATCH);
    // WatchList (`sendInitialEvents=true`, kubectl wait and client-go informers 1.32+):
    // the current objects as ADDED events, then a BOOKMARK annotated
    // `k8s.io/initial-events-end: "true"`, then live events.
    let initial_events = req.q("sendInitialEvents") == Some("true");
    let from: Option<u64> = req
        .q("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0" && !initial_events)
        .and_then(|v| v.parse().ok());
    let key = kind.key();
    // `kubectl get -w` asks for Tables: every event's object is then a one-row Table.
    let render: Render = if super::openapi::wants_table(req) {
        let sim = sim.clone();
        std::sync::Arc::new(move |etype: &str, obj: &Value| {
            line(
                etype,
                &super::openapi::table(&sim, kind, std::slice::from_ref(obj), None),
            )
        })
    } else {
        std::sync::Arc::new(line)
    };
    let sel = match Selectors::parse(req, kind) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let matches = {
        let ns = ns.clone();
        let key = key.clone();
        move |ev: &KubeEvent| -> bool {
            if ev.kind_key != key || ns.as_ref().is_some_and(|n| *n != ev.namespace) {
                return false;
            }
            sel.matches(&ev.object)
        }
    };
    // Snapshot and subscribe under the state lock: events are emitted under the same lock,
    // so nothing is missed or duplicated between the two.
    let (initial, rx) = {
        let st = lock(&sim.inner.state);
        let rx = sim.inner.events.subscribe();
        let initial: Vec<Bytes> = match from {
            Some(rv) if rv < st.kube_history_floor => {
                let status = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("too old resource version: {rv} ({})", st.kube_history_floor),
                    "reason": "Expired", "code": 410,
                });
                vec![line("ERROR", &status)]
            }
            Some(rv) => st
                .kube_events
                .iter()
                .filter(|e| e.rv > rv && matches(e))
                .map(|e| render(e.etype, &e.object))
                .collect(),
            None => {
                let mut objs: Vec<_> = st
                    .kube
                    .values()
                    .filter(|e| e.kind_key == key && ns.as_ref().is_none_or(|n| *n == e.namespace))
                    .collect();
                objs.sort_by_key(|e| e.created_seq);
                objs.into_iter()
                    .filter(|e| {
                        matches(&KubeEvent {
                            rv: 0,
                            kind_key: e.kind_key.clone(),
                            namespace: e.namespace.clone(),
                            etype: "ADDED",
                            object: e.object.clone(),
                        })
                    })
                    .map(|e| render("ADDED", &e.object))
                    .chain(initial_events.then(|| {
                        line(
                            "BOOKMARK",
                            &json!({"kind": kind.kind, "apiVersion": kind.api_version(),
                                "metadata": {"resourceVersion": st.kube_rv.to_string(),
                                    "annotations": {"k8s.io/initial-events-end": "true"}}}),
                        )
                    }))
                    .collect()
            }
        };
        (initial, rx)
    };
    let expired =
        initial.len() == 1 && from.is_some_and(|rv| rv < lock(&sim.inner.state).kube_history_floor);
    let live = futures::stream::unfold(
        (rx, matches, render),
        |(mut rx, matches, render)| async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        if matches(&ev) {
                            let b = render(ev.etype, &ev.object);
                            return Some((b, (rx, matches, render)));
                        }
                    }
                    // A lagging watcher cannot know what it missed: end the stream so the
                    // client resumes (and gets 410 if the history is gone).
                    Err(broadcast::error::RecvError::Lagged(_))
                    | Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    let initial = futures::stream::iter(initial);
    let stream = if expired {
        initial.boxed()
    } else {
        initial.chain(live).boxed()
    };
    let deadline = tokio::time::sleep(timeout);
    let stream = stream.take_until(deadline).map(Ok::<Bytes, std::io::Error>);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    resp
}
