//! The store conformance suite through PgBouncer in transaction mode, as
//! managed Postgres offerings put it in front: `HCP_TEST_PGBOUNCER_URL` names the pooler
//! (e.g. `postgres://postgres@127.0.0.1:6432/postgres`, `pool_mode = transaction`, a `*`
//! database fallback to the server), `HCP_TEST_POSTGRES_URL` the server itself. Each case
//! gets a fresh database, migrated directly against the server (never through the pooler),
//! then opened through the pooler with `?pooler=transaction`: no LISTEN, no migrations, no
//! session state.
//!
//! Needs PgBouncer 1.21 or later with `max_prepared_statements` > 0: sqlx sends every
//! statement as a protocol-level (named) prepared statement, which older poolers cannot
//! carry across server connections in transaction mode. Debian 12's own PgBouncer (1.18)
//! fails every case with "prepared statement "sqlx_s_1" already exists"; CI builds Debian's
//! current source package (1.24.1, trixie) and starts it with `.ci/pgbouncer.sh`, then sets
//! `HCP_TEST_PGBOUNCER_URL` and `HCP_REQUIRE_PGBOUNCER=1`.
#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use hcp_persistence::PostgresStore;
use hcp_runtime::conformance::{Harness, Skip};
use hcp_runtime::{JournalStore, RunId};
use sqlx::Connection;
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Bouncer {
    server: String,
    pooler: String,
    /// (store, its database's direct URL)
    dbs: Mutex<Vec<(Arc<dyn JournalStore>, String)>>,
}

impl Bouncer {
    fn from_env() -> Option<Self> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        match (get("HCP_TEST_POSTGRES_URL"), get("HCP_TEST_PGBOUNCER_URL")) {
            (Some(server), Some(pooler)) => Some(Self {
                server,
                pooler,
                dbs: Mutex::new(Vec::new()),
            }),
            _ => {
                assert!(
                    std::env::var("HCP_REQUIRE_PGBOUNCER").as_deref() != Ok("1"),
                    "HCP_REQUIRE_PGBOUNCER=1 but HCP_TEST_PGBOUNCER_URL or HCP_TEST_POSTGRES_URL is not set"
                );
                println!("skipped: HCP_TEST_PGBOUNCER_URL not set (PgBouncer tests need a pooler)");
                None
            }
        }
    }

    fn direct(&self, store: &Arc<dyn JournalStore>) -> String {
        self.dbs
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, store))
            .map(|(_, u)| u.clone())
            .unwrap()
    }
}

fn with_db(url: &str, db: &str) -> String {
    let (prefix, _) = url.rsplit_once('/').unwrap();
    format!("{prefix}/{db}")
}

#[async_trait]
impl Harness for Bouncer {
    async fn fresh(&self) -> Arc<dyn JournalStore> {
        let name = format!("hcp_pgb_{}", uuid::Uuid::new_v4().simple());
        let mut c = sqlx::PgConnection::connect(&self.server).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut c)
            .await
            .unwrap();
        let direct = with_db(&self.server, &name);
        // Migrations run against the server itself, as `hcp-workflow migrate` does.
        drop(PostgresStore::connect(&direct).await.unwrap());
        let pooled = format!("{}?pooler=transaction", with_db(&self.pooler, &name));
        let store: Arc<dyn JournalStore> = Arc::new(PostgresStore::connect(&pooled).await.unwrap());
        self.dbs.lock().unwrap().push((store.clone(), direct));
        store
    }

    async fn corrupt_event(&self, store: &Arc<dyn JournalStore>, run: RunId, seq: i64, data: &str) {
        let mut c = sqlx::PgConnection::connect(&self.direct(store))
            .await
            .unwrap();
        let done = sqlx::query("UPDATE events SET data = $1 WHERE run_id = $2 AND seq = $3")
            .bind(data)
            .bind(run)
            .bind(seq)
            .execute(&mut c)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }

    async fn lapse(&self, store: &Arc<dyn JournalStore>, by: Duration) {
        let mut c = sqlx::PgConnection::connect(&self.direct(store))
            .await
            .unwrap();
        sqlx::query(
            "UPDATE runs SET lease_expires_at = lease_expires_at - $1 * interval '1 millisecond' \
             WHERE lease_expires_at IS NOT NULL",
        )
        .bind(i64::try_from(by.as_millis()).unwrap())
        .execute(&mut c)
        .await
        .unwrap();
    }
}

mod through_pgbouncer {
    use super::*;

    struct H(Option<Bouncer>);

    #[async_trait]
    impl Harness for H {
        async fn fresh(&self) -> Arc<dyn JournalStore> {
            self.0.as_ref().unwrap().fresh().await
        }
        async fn corrupt_event(
            &self,
            store: &Arc<dyn JournalStore>,
            run: RunId,
            seq: i64,
            data: &str,
        ) {
            self.0
                .as_ref()
                .unwrap()
                .corrupt_event(store, run, seq, data)
                .await;
        }
        async fn lapse(&self, store: &Arc<dyn JournalStore>, by: Duration) {
            self.0.as_ref().unwrap().lapse(store, by).await;
        }
    }

    impl Skip for H {
        fn check(self) -> Option<Self> {
            if self.0.is_some() { Some(self) } else { None }
        }
    }

    hcp_runtime::conformance_tests!(H(Bouncer::from_env()));
}
