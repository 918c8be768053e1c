//! The schema rule every command opens a journal by: only `migrate` (and `bench`, on its
//! scratch journals) creates or upgrades a schema, except a SQLite journal not created yet;
//! any other command refuses a journal whose schema is not this binary's (exit 2).

use super::store::shown_url;
use crate::output::Refused;
use anyhow::Result;
use hcp_persistence::{SchemaStatus, SchemaVerdict};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `migrate` and `bench`: this process may create and upgrade schemas.
static MIGRATING: AtomicBool = AtomicBool::new(false);

/// Let this process's opens create and upgrade the journal's schema (`migrate`, `bench`).
pub fn allow_migrating() {
    MIGRATING.store(true, Ordering::SeqCst);
}

/// The journal's schema status, as an anyhow error the worker's patient open recognises
/// (a transient store error is waited out).
pub async fn status(url: &str) -> Result<SchemaStatus> {
    hcp_persistence::schema_status(url).await.map_err(|e| {
        anyhow::Error::new(e).context(format!("opening the journal at {}", shown_url(url)))
    })
}

/// Whether `url` goes through a transaction pooler (`?pooler=transaction`).
pub fn pooled(url: &str) -> bool {
    url.split_once('?').is_some_and(|(_, q)| {
        q.split('&')
            .any(|kv| kv.eq_ignore_ascii_case("pooler=transaction"))
    })
}

/// The `migrate` command that fixes `url`'s schema.
pub fn migrate_command(url: &str) -> String {
    let shown = shown_url(url);
    if pooled(url) {
        "hcp-workflow --database <the server's own URL, not the pooler's> migrate".to_string()
    } else {
        format!("hcp-workflow --database '{shown}' migrate")
    }
}

pub fn mismatch(message: String, st: &SchemaStatus) -> anyhow::Error {
    Refused {
        reason: "SchemaMismatch",
        message,
        details: Some(serde_json::json!({
            "backend": st.backend,
            "journal_schema": st.applied,
            "binary_schema": st.latest,
        })),
    }
    .into()
}

/// The rule of the module doc, checked before a command opens `url` for writing (and by
/// the read-only commands, which never create anything anyway). `Ok` when the open may go
/// on: the schema is this binary's, or this is a SQLite journal not created yet.
///
/// # Errors
/// [`Refused`] (exit 2) for a schema this binary must not use; store errors.
pub async fn gate(url: &str) -> Result<()> {
    if url == "memory:" || MIGRATING.load(Ordering::SeqCst) {
        return Ok(());
    }
    let st = status(url).await?;
    let shown = shown_url(url);
    match st.verdict() {
        SchemaVerdict::Current => Ok(()),
        SchemaVerdict::Fresh if st.backend == "sqlite" => Ok(()),
        SchemaVerdict::Fresh => Err(mismatch(
            format!(
                "{shown} holds no hcp-workflow journal yet: on Postgres only `migrate` creates the schema (directly against the server, by a deployment's migrate Job or by hand): run `{}`, then this again",
                migrate_command(url)
            ),
            &st,
        )),
        SchemaVerdict::Older => Err(mismatch(
            format!(
                "the journal at {shown} has schema version {}, older than this binary's {}: nothing was done; upgrade it with `{}` (workers of the older binary keep running on the upgraded schema), then start this one",
                st.applied.unwrap_or_default(),
                st.latest,
                migrate_command(url)
            ),
            &st,
        )),
        SchemaVerdict::Newer => Err(mismatch(
            format!(
                "the journal at {shown} has schema version {}, newer than this binary knows ({}): a newer hcp-workflow migrated it; nothing was done: run the newer binary (hcp-workflow --version says which this is)",
                st.applied.unwrap_or_default(),
                st.latest
            ),
            &st,
        )),
    }
}
