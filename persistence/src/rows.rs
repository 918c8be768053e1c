//! Row decoding and lease ordering shared by both backends: everything that does not
//! depend on how a backend stores a column (only the run id's encoding differs, so the
//! caller decodes it).

use crate::error::{bad_row, classify};
use hcp_runtime::store::{
    CreateOutcome, Lease, NewRun, ReportFilter, ReportRecord, RunId, RunSummary,
};
use hcp_runtime::{RunState, StoreError, Timestamp};
use sqlx::{ColumnIndex, Decode, Row, Type};
use std::collections::BTreeMap;

/// How many columns the backends' `SUMMARY_COLUMNS` select (columns after them start here).
pub(crate) const SUMMARY_WIDTH: usize = 17;

/// Decode the summary columns (the backend's `SUMMARY_COLUMNS` order; column 0, the id,
/// already decoded by the caller as `id`).
pub(crate) fn summary_from_row<R>(row: &R, id: RunId) -> Result<RunSummary, StoreError>
where
    R: Row,
    usize: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let version: i64 = row.try_get(2).map_err(classify)?;
    let labels: String = row.try_get(3).map_err(classify)?;
    let state: String = row.try_get(5).map_err(classify)?;
    let ts = |i: usize| row.try_get::<i64, _>(i).map(Timestamp).map_err(classify);
    let opt_ts = |i: usize| {
        row.try_get::<Option<i64>, _>(i)
            .map(|t| t.map(Timestamp))
            .map_err(classify)
    };
    Ok(RunSummary {
        id,
        workflow: row.try_get(1).map_err(classify)?,
        workflow_version: u32::try_from(version)
            .map_err(|_| bad_row(format!("run {id}: workflow_version {version}")))?,
        labels: serde_json::from_str::<BTreeMap<String, String>>(&labels)
            .map_err(|e| bad_row(format!("run {id}: labels {labels:?}: {e}")))?,
        idempotency_key: row.try_get(4).map_err(classify)?,
        state: RunState::parse(&state)
            .ok_or_else(|| bad_row(format!("run {id}: unknown state {state:?}")))?,
        blocked_on: row.try_get(6).map_err(classify)?,
        current_step: row.try_get(7).map_err(classify)?,
        created_at: ts(8)?,
        updated_at: ts(9)?,
        wake_at: opt_ts(10)?,
        lease_owner: row.try_get(11).map_err(classify)?,
        lease_epoch: row.try_get(12).map_err(classify)?,
        lease_expires_at: opt_ts(13)?,
        commands_pending: row.try_get(14).map_err(classify)?,
        exclusive_key: row.try_get(15).map_err(classify)?,
        target: row.try_get(16).map_err(classify)?,
    })
}

/// Leases for acquired `(wake_at, run, epoch)` rows, most overdue first like the
/// in-memory store (`RETURNING` order is unspecified).
pub(crate) fn leases_most_overdue_first(
    mut due: Vec<(i64, RunId, i64)>,
    owner: &str,
    expires_at: Timestamp,
) -> Vec<Lease> {
    due.sort();
    due.into_iter()
        .map(|(_, run_id, epoch)| Lease {
            run_id,
            owner: owner.to_string(),
            epoch,
            expires_at,
        })
        .collect()
}

/// A create whose idempotency key run `id` (of `workflow`, with `exclusive`) already holds:
/// the same start again (same workflow and exclusive key), or the key reused for another.
pub(crate) fn key_taken(
    id: RunId,
    workflow: &str,
    exclusive: Option<&str>,
    run: &NewRun,
) -> CreateOutcome {
    if workflow == run.workflow && exclusive == run.exclusive_key.as_deref() {
        CreateOutcome::Existing(id)
    } else {
        CreateOutcome::KeyReused(id)
    }
}

/// The filter of `list_reports` after its `WHERE kind = ` (both backends: the query's
/// columns are `id, kind, subject, at (ms), ok, made_by, data` from `reports r`).
pub(crate) fn push_report_filter<'a, DB>(
    q: &mut sqlx::QueryBuilder<'a, DB>,
    filter: &'a ReportFilter,
) where
    DB: sqlx::Database,
    &'a str: sqlx::Encode<'a, DB> + Type<DB>,
    i64: sqlx::Encode<'a, DB> + Type<DB>,
{
    q.push_bind(filter.kind.as_str());
    if let Some(s) = &filter.subject {
        q.push(" AND subject = ").push_bind(s.as_str());
    }
    if filter.latest_only {
        q.push(
            " AND id = (SELECT max(id) FROM reports x \
             WHERE x.kind = r.kind AND x.subject = r.subject)",
        );
    }
    q.push(" ORDER BY id DESC");
    if filter.limit > 0 {
        q.push(" LIMIT ")
            .push_bind(i64::try_from(filter.limit).unwrap_or(i64::MAX));
    }
}

/// One `list_reports` row (see [`push_report_filter`] for the columns).
pub(crate) fn report_from_row<R>(row: &R) -> Result<ReportRecord, StoreError>
where
    R: Row,
    usize: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(ReportRecord {
        id: row.try_get(0).map_err(classify)?,
        kind: row.try_get(1).map_err(classify)?,
        subject: row.try_get(2).map_err(classify)?,
        at: Timestamp(row.try_get(3).map_err(classify)?),
        ok: row.try_get(4).map_err(classify)?,
        by: row.try_get(5).map_err(classify)?,
        data: row.try_get(6).map_err(classify)?,
    })
}
