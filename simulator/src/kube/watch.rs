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
use super::api::selectors_match;
use crate::http::Req;
use crate::sim::{Simulator, lock};
use crate::state::KubeEvent;

/// Longest watch the server keeps open when the client does not ask for less.
const MAX_WATCH: Duration = Duration::from_secs(1800);

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
    let from: Option<u64> = req
        .q("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
        .and_then(|v| v.parse().ok());
    let key = kind.key();
    let matches = {
        let label = req.q("labelSelector").map(str::to_string);
        let field = req.q("fieldSelector").map(str::to_string);
        let ns = ns.clone();
        let key = key.clone();
        move |ev: &KubeEvent| -> bool {
            if ev.kind_key != key || ns.as_ref().is_some_and(|n| *n != ev.namespace) {
                return false;
            }
            let probe = Req {
                method: axum::http::Method::GET,
                path: String::new(),
                path_and_query: String::new(),
                segments: vec![],
                query: [("labelSelector", &label), ("fieldSelector", &field)]
                    .iter()
                    .filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), v.clone())))
                    .collect(),
                headers: Default::default(),
                body: Bytes::new(),
                host: String::new(),
            };
            selectors_match(&probe, &ev.object)
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
                .map(|e| line(e.etype, &e.object))
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
                    .map(|e| line("ADDED", &e.object))
                    .collect()
            }
        };
        (initial, rx)
    };
    let expired =
        initial.len() == 1 && from.is_some_and(|rv| rv < lock(&sim.inner.state).kube_history_floor);
    let live = futures::stream::unfold((rx, matches), |(mut rx, matches)| async move {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    if matches(&ev) {
                        let b = line(ev.etype, &ev.object);
                        return Some((b, (rx, matches)));
                    }
                }
                // A lagging watcher cannot know what it missed: end the stream so the
                // client resumes (and gets 410 if the history is gone).
                Err(broadcast::error::RecvError::Lagged(_))
                | Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
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
