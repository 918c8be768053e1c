//! Stamps the binary with the git commit it was built from and the build date, for
//! `hcp-workflow --version` (`hcp-workflow 0.1.0 (a1b2c3d 2026-11-23)`).
//!
//! - `HCP_GIT_COMMIT`: the short hash of HEAD, with `-dirty` when tracked files differ from
//!   it; `unknown` without git or outside a repository (a source tarball).
//! - `HCP_BUILD_DATE`: the UTC date (RFC 3339 full-date) of the build, or of
//!   `SOURCE_DATE_EPOCH` when set (reproducible builds).
//!
//! Reruns when HEAD moves (`.git/HEAD`, the branch ref it names, packed refs); a tree
//! that becomes dirty without a commit is noticed at the next rerun.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let commit = commit(&manifest).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=HCP_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=HCP_BUILD_DATE={}", build_date());
}

/// `git` in `dir`, its trimmed stdout when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        // Read-only: `status` must not rewrite the index under someone else's feet.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn commit(dir: &Path) -> Option<String> {
    let git_dir = PathBuf::from(git(dir, &["rev-parse", "--absolute-git-dir"])?);
    watch_git(dir, &git_dir);
    let hash = git(dir, &["rev-parse", "--short=7", "HEAD"])?;
    if hash.is_empty() {
        return None;
    }
    let dirty =
        git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// Rerun when HEAD or the ref it points at change. Only existing files are
/// named: cargo reruns every build for a missing one.
fn watch_git(dir: &Path, git_dir: &Path) {
    let common = git(dir, &["rev-parse", "--git-common-dir"])
        .map(|c| {
            let c = PathBuf::from(c);
            if c.is_absolute() { c } else { dir.join(c) }
        })
        .unwrap_or_else(|| git_dir.to_path_buf());
    let mut watched = vec![git_dir.join("HEAD")];
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        watched.push(git_dir.join(r));
        watched.push(common.join(r));
    }
    watched.push(common.join("packed-refs"));
    watched.sort();
    watched.dedup();
    for p in watched.iter().filter(|p| p.is_file()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

/// Today (UTC), or the day of `SOURCE_DATE_EPOCH`, as `YYYY-MM-DD` (humantime's RFC 3339
/// rendering, cut to the date).
fn build_date() -> String {
    let at = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or_else(SystemTime::now, |secs| {
            UNIX_EPOCH + std::time::Duration::from_secs(secs)
        });
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .chars()
        .take(10)
        .collect()
}
