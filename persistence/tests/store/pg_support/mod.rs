//! Shared by the PostgreSQL test files: the server from `HCP_TEST_POSTGRES_URL`, one random
//! schema per store, schemas dropped when the test ends.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code, clippy::unwrap_used)]

use hcp_persistence::PostgresStore;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor};
use std::sync::Mutex;

/// The test server, or `None` (after printing why) when the tests should skip.
pub struct PgTestDb {
    url: String,
    schemas: Mutex<Vec<String>>,
}

impl PgTestDb {
    /// `None` when `HCP_TEST_POSTGRES_URL` is unset (prints `skipped: …`).
    ///
    /// # Panics
    /// When it is unset but `HCP_REQUIRE_POSTGRES=1`.
    pub fn from_env() -> Option<Self> {
        match std::env::var("HCP_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => Some(Self {
                url,
                schemas: Mutex::new(Vec::new()),
            }),
            _ => {
                assert!(
                    std::env::var("HCP_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                    "HCP_REQUIRE_POSTGRES=1 but HCP_TEST_POSTGRES_URL is not set"
                );
                println!("skipped: HCP_TEST_POSTGRES_URL not set");
                None
            }
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new random schema name, dropped with `self`.
    pub fn new_schema(&self) -> String {
        let name = format!("hcp_test_{}", uuid::Uuid::new_v4().simple());
        self.schemas.lock().unwrap().push(name.clone());
        name
    }

    /// A store in a new schema, and that schema's name.
    pub async fn fresh_store(&self) -> (PostgresStore, String) {
        let schema = self.new_schema();
        let store = PostgresStore::connect_with_schema(&self.url, &schema)
            .await
            .unwrap();
        (store, schema)
    }

    /// A plain connection (default search path).
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.unwrap()
    }
}

impl Drop for PgTestDb {
    fn drop(&mut self) {
        let schemas = std::mem::take(&mut *self.schemas.lock().unwrap());
        if schemas.is_empty() {
            return;
        }
        let url = self.url.clone();
        // Drop runs inside the test's tokio runtime, which must not be blocked on: clean up
        // from a thread with a runtime of its own. Best effort; a leftover schema is inert.
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let Ok(mut conn) = PgConnection::connect(&url).await else {
                    return;
                };
                for s in schemas {
                    let _ = conn
                        .execute(format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE").as_str())
                        .await;
                }
            });
        });
        let _ = cleanup.join();
    }
}
