//! The runtime's store conformance suite against [`SqliteStore`]: one `#[tokio::test]` per
//! guarantee (`hcp_runtime::conformance_tests!`), each on a fresh journal file in a
//! temporary directory.

#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use hcp_persistence::SqliteStore;
use hcp_runtime::JournalStore;
use hcp_runtime::conformance::{Harness, Skip};
use hcp_runtime::store::RunId;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

/// Fresh journals in temporary directories (kept until the harness drops, after the store).
#[derive(Default)]
struct SqliteHarness {
    dirs: Mutex<Vec<TempDir>>,
    /// The journal file of each store handed out, to corrupt rows behind its back.
    files: Mutex<Vec<(Arc<dyn JournalStore>, PathBuf)>>,
}

#[async_trait]
impl Harness for SqliteHarness {
    async fn fresh(&self) -> Arc<dyn JournalStore> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let store: Arc<dyn JournalStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
        self.dirs.lock().unwrap().push(dir);
        self.files.lock().unwrap().push((Arc::clone(&store), path));
        store
    }

    async fn corrupt_event(&self, store: &Arc<dyn JournalStore>, run: RunId, seq: i64, data: &str) {
        let path = self
            .files
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, store))
            .map(|(_, p)| p.clone())
            .unwrap();
        // A separate connection, like an outside tool editing the file.
        use sqlx::{Connection, SqliteConnection};
        let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let done = sqlx::query("UPDATE events SET data = ?1 WHERE run_id = ?2 AND seq = ?3")
            .bind(data)
            .bind(run.hyphenated().to_string())
            .bind(seq)
            .execute(&mut conn)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }
}

impl Skip for SqliteHarness {
    fn check(self) -> Option<Self> {
        Some(self)
    }
}

hcp_runtime::conformance_tests!(SqliteHarness::default());
