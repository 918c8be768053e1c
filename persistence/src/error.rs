//! Classifying sqlx errors into [`StoreError::Transient`] and [`StoreError::Permanent`].
//!
//! The executor retries transient journal writes (never skipping one) and gives up on
//! permanent ones, so a wrong "transient" hangs a worker and a wrong "permanent" fails a run
//! for a hiccup. Classification looks at the error's *code* only (the SQLite extended result
//! code, the PostgreSQL SQLSTATE) and at the sqlx variant; message text is for humans and
//! changes between versions and locales.

use hcp_runtime::StoreError;
use sqlx::error::DatabaseError;
use std::sync::Arc;

/// SQLITE_BUSY: another connection holds the lock we need (after `busy_timeout`).
const SQLITE_BUSY: i32 = 5;
/// SQLITE_LOCKED: a conflict inside this connection's shared cache / a table lock.
const SQLITE_LOCKED: i32 = 6;
/// SQLITE_IOERR (and its extended codes, e.g. SQLITE_IOERR_SHMSIZE when the WAL index cannot
/// grow): the file system refused a read or write, typically a full disk.
const SQLITE_IOERR: i32 = 10;
/// SQLITE_FULL: the disk (or the database's size limit) is full.
const SQLITE_FULL: i32 = 13;

/// Classify a sqlx error.
///
/// # Guarantees
/// Transient: SQLite `SQLITE_BUSY`/`SQLITE_LOCKED`, `SQLITE_IOERR`/`SQLITE_FULL` (a full
/// disk: waited out like Postgres' class 53) and their extended codes; PostgreSQL
/// SQLSTATE class `08` (connection exception), `40001` (serialization failure), `40P01`
/// (deadlock), class `53` (insufficient resources), `57P01`–`57P03` (server shutting down
/// or not yet accepting connections); and the sqlx variants `PoolTimedOut`, `Io` and
/// `WorkerCrashed`. Everything else is permanent, including `PoolClosed` (our pools are only
/// closed when the store is dropped, so retrying could never succeed) and migration errors
/// other than a transient database error while applying one.
pub fn classify(err: sqlx::Error) -> StoreError {
    if is_transient(&err) {
        StoreError::Transient(Box::new(err))
    } else {
        StoreError::Permanent(Box::new(err))
    }
}

/// Whether `err` is SQLite lock contention (`SQLITE_BUSY`, `SQLITE_LOCKED`): another
/// connection holds the lock, and the same call succeeds once it lets go.
pub fn is_lock_contention(err: &StoreError) -> bool {
    let StoreError::Transient(source) = err else {
        return false;
    };
    let busy = |e: &sqlx::Error| match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::sqlite::SqliteError>()
            .and_then(|e| e.code())
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|c| matches!(c & 0xff, SQLITE_BUSY | SQLITE_LOCKED)),
        _ => false,
    };
    source
        .downcast_ref::<sqlx::Error>()
        .is_some_and(|e| match e {
            sqlx::Error::Migrate(m) => match m.as_ref() {
                sqlx::migrate::MigrateError::Execute(inner) => busy(inner),
                _ => false,
            },
            other => busy(other),
        })
}

/// Whether `err` is worth retrying (see [`classify`]).
pub fn is_transient(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => is_transient_code(db.as_ref()),
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Migrate(m) => match m.as_ref() {
            sqlx::migrate::MigrateError::Execute(e) => is_transient(e),
            _ => false,
        },
        _ => false,
    }
}

fn is_transient_code(db: &dyn DatabaseError) -> bool {
    if let Some(e) = db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        // `code()` is the extended result code; the primary code is its low byte
        // (SQLITE_BUSY_SNAPSHOT = 517 = 5 | 2 << 8, SQLITE_LOCKED_SHAREDCACHE = 262, …).
        return e
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            // A full disk is worth waiting out, as on Postgres (SQLSTATE 53100): the writer
            // retries, saying why, instead of the worker exiting.
            .is_some_and(|c| {
                matches!(
                    c & 0xff,
                    SQLITE_BUSY | SQLITE_LOCKED | SQLITE_IOERR | SQLITE_FULL
                )
            });
    }
    if let Some(e) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return is_transient_sqlstate(e.code());
    }
    false
}

/// Whether a PostgreSQL SQLSTATE is worth retrying.
pub fn is_transient_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(code, "40001" | "40P01" | "57P01" | "57P02" | "57P03")
}

/// A failed migration, classified; a journal migrated by a newer binary gets a message that
/// says so instead of sqlx's "previously applied but is missing".
pub(crate) fn migrate_error(err: sqlx::migrate::MigrateError, latest: i64) -> StoreError {
    use sqlx::migrate::MigrateError;
    match err {
        MigrateError::VersionMissing(v) => StoreError::permanent(format!(
            "the journal's schema is at version {v}, newer than this binary knows (up to \
             {latest}): run a newer hcp-workflow"
        )),
        MigrateError::Execute(e) => classify(e),
        other => StoreError::Permanent(Box::new(other)),
    }
}

/// A sqlx error that must be reported to several callers (a failed group commit fails every
/// request in the batch). `sqlx::Error` is not `Clone`, so the callers share it.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    err: Arc<sqlx::Error>,
    transient: bool,
}

impl Shared {
    pub(crate) fn new(err: sqlx::Error) -> Self {
        Self {
            transient: is_transient(&err),
            err: Arc::new(err),
        }
    }

    /// The error for one caller, classified like the original.
    pub(crate) fn to_store_error(&self) -> StoreError {
        let boxed = Box::new(Arc::clone(&self.err));
        if self.transient {
            StoreError::Transient(boxed)
        } else {
            StoreError::Permanent(boxed)
        }
    }
}

/// A permanent error for a row the store wrote itself but cannot read back (a column out of
/// range, an unknown state): the schema's CHECK constraints make this a sign of outside
/// tampering or of a newer binary's data.
pub(crate) fn bad_row(what: impl std::fmt::Display) -> StoreError {
    StoreError::permanent(format!("unreadable journal row: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates() {
        for code in [
            "08006", "08001", "40001", "40P01", "53300", "53100", "57P01", "57P03",
        ] {
            assert!(is_transient_sqlstate(code), "{code}");
        }
        for code in [
            "23505", "23503", "42P01", "22008", "57014", "42501", "XX000",
        ] {
            assert!(!is_transient_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn sqlx_variants() {
        assert!(is_transient(&sqlx::Error::PoolTimedOut));
        assert!(is_transient(&sqlx::Error::WorkerCrashed));
        assert!(is_transient(&sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset
        ))));
        assert!(!is_transient(&sqlx::Error::PoolClosed));
        assert!(!is_transient(&sqlx::Error::RowNotFound));
        assert!(!is_transient(&sqlx::Error::Protocol("x".into())));
        assert!(matches!(
            classify(sqlx::Error::PoolTimedOut),
            StoreError::Transient(_)
        ));
        assert!(matches!(
            classify(sqlx::Error::ColumnNotFound("x".into())),
            StoreError::Permanent(_)
        ));
    }

    #[test]
    fn shared_keeps_the_class() {
        let s = Shared::new(sqlx::Error::PoolTimedOut);
        assert!(s.to_store_error().is_retryable());
        assert!(s.to_store_error().is_retryable());
        assert!(
            !Shared::new(sqlx::Error::RowNotFound)
                .to_store_error()
                .is_retryable()
        );
    }
}
