//! The store conformance suite against the in-memory store.
#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use hcp_runtime::MemoryStore;
use hcp_runtime::conformance::{Harness, Skip};
use hcp_runtime::store::{JournalStore, RunId};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Mem {
    last: Mutex<Option<Arc<MemoryStore>>>,
}

#[async_trait]
impl Harness for Mem {
    async fn fresh(&self) -> Arc<dyn JournalStore> {
        let s = Arc::new(MemoryStore::new());
        *self.last.lock().unwrap() = Some(s.clone());
        s
    }
    async fn corrupt_event(
        &self,
        _store: &Arc<dyn JournalStore>,
        run: RunId,
        seq: i64,
        data: &str,
    ) {
        let s = self.last.lock().unwrap().clone().unwrap();
        s.corrupt_event(run, seq, data).unwrap();
    }
}

impl Skip for Mem {
    fn check(self) -> Option<Self> {
        Some(self)
    }
}

hcp_runtime::conformance_tests!(Mem::default());
