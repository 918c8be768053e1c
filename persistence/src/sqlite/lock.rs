//! The executor lock (one executing process per SQLite journal) and the write-intent lock
//! (operators get a turn at writing beside a busy executor).
//!
//! SQLite gives a file one writer at a time, and our lease expiry is the only way a crashed
//! executor's runs would otherwise come back. An OS advisory lock on `<db>.executor.lock`
//! settles both: the kernel drops it the instant its holder dies (even on SIGKILL), so the
//! next executor knows every lease in the file belongs to a dead process and can release
//! them all at once instead of waiting for them to expire.
//!
//! # What this relies on
//! `std::fs::File::try_lock` (flock(2) on Linux, `LockFileEx` on Windows) locks an *open file
//! description*: a second `open` of the lock file conflicts even inside the same process, so
//! two [`super::SqliteStore`]s on one journal in one process exclude each other just like two
//! processes do. The lock lasts as long as the `File` is open (the store's lifetime). The
//! holder writes its pid and worker id into the file so the refusal can name it; the file is
//! never deleted (deleting a lock file races with a new holder) and is never truncated
//! before the lock is held (that would erase the holder's name).
//!
//! # Write intent
//! SQLite's write lock is not fair: a waiter polls with growing sleeps (up to 100 ms) and an
//! executor committing batch after batch almost always gets there first, so an operator's
//! `cancel` could wait out the whole `busy_timeout` and fail. `<db>.write-intent.lock`
//! hands the turn over explicitly: a store that is *not* the executor holds it exclusively
//! around each of its write transactions, and the executor checks it (a non-blocking shared
//! lock, two syscalls) before each batch and, while it is held, waits for the operator's
//! transaction to finish. Both waits are bounded by the busy timeout, after which SQLite's
//! own locking decides as before: the intent lock only ever improves fairness, it is never
//! needed for correctness.

use hcp_runtime::{ExecutorHolder, StoreError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `<db path>.executor.lock`.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".executor.lock");
    PathBuf::from(s)
}

/// `<db path>.write-intent.lock`.
pub(crate) fn intent_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".write-intent.lock");
    PathBuf::from(s)
}

/// How often a writer waiting for its turn looks again. Short against a batch (~1–20 ms),
/// long against the two syscalls a look costs.
const INTENT_POLL: Duration = Duration::from_millis(1);

/// How long the executor waits for an announced write before going ahead anyway. An
/// operator's write takes milliseconds; waiting longer means the announcer is stuck (e.g.
/// stopped with ^Z between announcing and writing).
const YIELD_PATIENCE: Duration = Duration::from_secs(2);

/// After giving up on a stuck announcer, how long the executor stops yielding at all, so a
/// stuck operator costs it one wait, not one per batch.
const YIELD_BACKOFF: Duration = Duration::from_secs(30);

/// One store's handle on the write-intent lock file.
#[derive(Debug)]
pub(crate) struct WriteIntent {
    file: File,
    /// Executor side: do not yield before this instant (see [`YIELD_BACKOFF`]).
    deaf_until: std::sync::Mutex<Option<Instant>>,
}

/// An announced write: the executor waits until this is dropped.
#[derive(Debug)]
pub(crate) struct IntentGuard<'a>(&'a File);

impl Drop for IntentGuard<'_> {
    fn drop(&mut self) {
        // Closing the store's file would release it too; an unlock error leaves the lock
        // held only until then.
        let _ = self.0.unlock();
    }
}

impl WriteIntent {
    /// Open (creating) the intent lock file of the journal at `db`.
    pub(crate) fn open(db: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(intent_path(db))?;
        Ok(Self {
            file,
            deaf_until: std::sync::Mutex::new(None),
        })
    }

    /// Executor side: if another store announced a write, wait until it is done (at most
    /// [`YIELD_PATIENCE`]).
    pub(crate) async fn yield_to_others(&self) {
        let now = Instant::now();
        if let Ok(mut deaf) = self.deaf_until.lock() {
            match *deaf {
                Some(t) if now < t => return,
                Some(_) => *deaf = None,
                None => {}
            }
        }
        let deadline = now + YIELD_PATIENCE;
        loop {
            match self.file.try_lock_shared() {
                Ok(()) => {
                    let _ = self.file.unlock();
                    return;
                }
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(INTENT_POLL).await;
                }
                Err(TryLockError::WouldBlock) => {
                    tracing::warn!(
                        "another process announced a journal write {YIELD_PATIENCE:?} ago and \
                         has not finished it; not waiting for it for {YIELD_BACKOFF:?}"
                    );
                    if let Ok(mut deaf) = self.deaf_until.lock() {
                        *deaf = Some(Instant::now() + YIELD_BACKOFF);
                    }
                    return;
                }
                Err(TryLockError::Error(_)) => return,
            }
        }
    }

    /// Occasional-writer side: announce a write (waiting at most `patience` for other
    /// occasional writers). `None`: proceed without (SQLite's locking still applies).
    pub(crate) async fn announce(&self, patience: Duration) -> Option<IntentGuard<'_>> {
        let deadline = Instant::now() + patience;
        loop {
            match self.file.try_lock() {
                Ok(()) => return Some(IntentGuard(&self.file)),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(INTENT_POLL).await;
                }
                Err(_) => return None,
            }
        }
    }
}

/// A held executor lock.
#[derive(Debug)]
pub(crate) struct ExecutorLock {
    file: File,
    /// Worker ids that claimed through this store (normally one).
    owners: Vec<String>,
    /// The targets they serve; `None`: any.
    serves: Option<Vec<String>>,
}

impl ExecutorLock {
    /// Take the lock at `lock` for `owner`, or say who holds it.
    ///
    /// # Errors
    /// [`StoreError::ExecutorBusy`] when another open file description (another process, or
    /// another store in this one) holds it; [`StoreError::Permanent`] when the lock file cannot
    /// be opened or locked at all.
    pub(crate) fn acquire(
        db: &Path,
        lock: &Path,
        owner: &str,
        serves: Option<&[String]>,
    ) -> Result<Self, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock)
            .map_err(|e| {
                StoreError::permanent(format!(
                    "cannot open the executor lock file {}: {e}",
                    lock.display()
                ))
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let h = read_holder(&mut file);
                return Err(StoreError::ExecutorBusy(format!(
                    "journal {} is being executed by another hcp-workflow process (pid {}, \
                     worker {}{}); stop it or point --database elsewhere",
                    db.display(),
                    h.pid,
                    h.worker,
                    h.serves
                        .as_ref()
                        .map(|s| format!(", serving {}", s.join(", ")))
                        .unwrap_or_default()
                )));
            }
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::permanent(format!(
                    "cannot lock the executor lock file {}: {e}",
                    lock.display()
                )));
            }
        }
        let mut me = Self {
            file,
            owners: vec![owner.to_string()],
            serves: serves.map(<[String]>::to_vec),
        };
        me.write_holder()?;
        Ok(me)
    }

    /// Whether `owner` already claimed through this lock.
    pub(crate) fn has_owner(&self, owner: &str) -> bool {
        self.owners.iter().any(|o| o == owner)
    }

    /// Record another worker of this process (the lock is already ours), and the targets
    /// it serves (joining those already served; `None` serves any).
    pub(crate) fn add_owner(
        &mut self,
        owner: &str,
        serves: Option<&[String]>,
    ) -> Result<(), StoreError> {
        let before = self.serves.clone();
        self.serves = match (self.serves.take(), serves) {
            (Some(mut mine), Some(more)) => {
                for t in more {
                    if !mine.contains(t) {
                        mine.push(t.clone());
                    }
                }
                Some(mine)
            }
            _ => None,
        };
        if !self.has_owner(owner) || before != self.serves {
            if !self.has_owner(owner) {
                self.owners.push(owner.to_string());
            }
            self.write_holder()?;
        }
        Ok(())
    }

    fn write_holder(&mut self) -> Result<(), StoreError> {
        let text = format!(
            "pid={}\nworker={}\nserves={}\n",
            std::process::id(),
            self.owners.join(","),
            self.serves
                .as_ref()
                .map_or_else(|| "*".to_string(), |s| s.join(","))
        );
        let res = self
            .file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)))
            .and_then(|_| self.file.write_all(text.as_bytes()))
            .and_then(|()| self.file.flush());
        // The holder's name is a courtesy for the next claimant's error message; failing to
        // write it must not fail the claim, whose lock we do hold.
        if let Err(e) = res {
            tracing::warn!(error = %e, "could not record the executor in its lock file");
        }
        Ok(())
    }
}

/// Who holds the executor lock at `lock`, if anyone else does: a probe that takes the lock
/// for an instant when it is free (and gives it straight back).
pub(crate) fn holder(lock: &Path) -> Result<Option<ExecutorHolder>, StoreError> {
    let mut file = match OpenOptions::new().read(true).write(true).open(lock) {
        Ok(f) => f,
        // Never created: nobody ever executed this journal. Unreadable: not ours to judge
        // here (claiming it will say why).
        Err(_) => return Ok(None),
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(TryLockError::WouldBlock) => Ok(Some(read_holder(&mut file))),
        Err(TryLockError::Error(_)) => Ok(None),
    }
}

/// Best-effort holder, as written by [`ExecutorLock::write_holder`].
fn read_holder(file: &mut File) -> ExecutorHolder {
    let mut text = String::new();
    // A holder that died between locking and writing leaves an empty file; a read error is
    // no reason to hide the refusal itself.
    let _ = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text));
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    };
    let serves = match field("serves=").as_str() {
        // Not recorded (an older holder) or any target.
        "unknown" | "*" => None,
        list => Some(list.split(',').map(str::to_string).collect()),
    };
    ExecutorHolder {
        pid: field("pid="),
        worker: field("worker="),
        serves,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_holder_says_which_targets_it_serves() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("j.db");
        let lock = lock_path(&db);
        assert_eq!(holder(&lock).unwrap(), None, "never executed");
        let sim = vec!["simulator/in-process".to_string()];
        let mut held = ExecutorLock::acquire(&db, &lock, "w1", Some(&sim)).unwrap();
        let h = holder(&lock).unwrap().unwrap();
        assert_eq!(h.pid, std::process::id().to_string());
        assert_eq!(h.serves.as_deref(), Some(&sim[..]));
        assert!(h.serves("simulator/in-process"));
        assert!(!h.serves("azure/public"));
        // A second worker of the process joins the targets; one serving any target makes
        // the holder serve any.
        held.add_owner("w2", Some(&["azure/public".to_string()]))
            .unwrap();
        let h = holder(&lock).unwrap().unwrap();
        assert!(h.serves("azure/public") && h.serves("simulator/in-process"));
        held.add_owner("w3", None).unwrap();
        assert_eq!(holder(&lock).unwrap().unwrap().serves, None);
        drop(held);
        assert_eq!(holder(&lock).unwrap(), None, "released with the file");
    }

    #[test]
    fn second_open_in_the_same_process_is_refused_with_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("j.db");
        let lock = lock_path(&db);
        assert!(lock.to_string_lossy().ends_with("j.db.executor.lock"));
        let mut held = ExecutorLock::acquire(&db, &lock, "w1", None).unwrap();
        held.add_owner("w2", None).unwrap();
        assert!(held.has_owner("w2"));
        let err = ExecutorLock::acquire(&db, &lock, "other", None).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::ExecutorBusy(_)), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("worker w1,w2"), "{msg}");
        assert!(msg.contains("point --database elsewhere"), "{msg}");
        drop(held);
        // the kernel released it with the file
        ExecutorLock::acquire(&db, &lock, "other", None).unwrap();
    }
}
