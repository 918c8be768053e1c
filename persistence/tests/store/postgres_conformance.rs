//! The runtime's store conformance suite against [`PostgresStore`], each case in a new
//! random schema of the server named by `HCP_TEST_POSTGRES_URL`.
//!
//! Without that variable every case prints `skipped: HCP_TEST_POSTGRES_URL not set` and
//! passes, unless `HCP_REQUIRE_POSTGRES=1` (CI), which turns the skip into a failure.

#![allow(clippy::unwrap_used)]

use crate::pg_support;

use async_trait::async_trait;
use hcp_runtime::JournalStore;
use hcp_runtime::conformance::{Harness, Skip};
use hcp_runtime::store::RunId;
use pg_support::PgTestDb;
use std::sync::{Arc, Mutex};

/// Hands out stores in fresh schemas; drops the schemas when the case ends.
struct PgHarness {
    db: Option<PgTestDb>,
    /// The schema of each store handed out, to corrupt rows behind its back.
    schemas: Mutex<Vec<(Arc<dyn JournalStore>, String)>>,
}

impl PgHarness {
    fn from_env() -> Self {
        Self {
            db: PgTestDb::from_env(),
            schemas: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl Harness for PgHarness {
    async fn fresh(&self) -> Arc<dyn JournalStore> {
        let db = self.db.as_ref().unwrap();
        let (store, schema) = db.fresh_store().await;
        let store: Arc<dyn JournalStore> = Arc::new(store);
        self.schemas
            .lock()
            .unwrap()
            .push((Arc::clone(&store), schema));
        store
    }

    async fn corrupt_event(&self, store: &Arc<dyn JournalStore>, run: RunId, seq: i64, data: &str) {
        let schema = self
            .schemas
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, store))
            .map(|(_, name)| name.clone())
            .unwrap();
        let mut conn = self.db.as_ref().unwrap().connect().await;
        let done = sqlx::query(&format!(
            "UPDATE \"{schema}\".events SET data = $1 WHERE run_id = $2 AND seq = $3"
        ))
        .bind(data)
        .bind(run)
        .bind(seq)
        .execute(&mut conn)
        .await
        .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }

    /// The database's clock decides lease expiry: `by` passing is every lease ending `by`
    /// earlier on that clock.
    async fn lapse(&self, store: &Arc<dyn JournalStore>, by: std::time::Duration) {
        let schema = self
            .schemas
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, store))
            .map(|(_, name)| name.clone())
            .unwrap();
        let mut conn = self.db.as_ref().unwrap().connect().await;
        sqlx::query(&format!(
            "UPDATE \"{schema}\".runs SET lease_expires_at = lease_expires_at - $1 * interval '1 millisecond' \
             WHERE lease_expires_at IS NOT NULL"
        ))
        .bind(i64::try_from(by.as_millis()).unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

impl Skip for PgHarness {
    fn check(self) -> Option<Self> {
        if self.db.is_some() { Some(self) } else { None }
    }
}

hcp_runtime::conformance_tests!(PgHarness::from_env());
