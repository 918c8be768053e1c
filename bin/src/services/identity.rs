//! Who acts: the operator identity every run and operator command records, and the audit
//! labels a run carries.

/// The operator's identity for the journal: `$USER`, else `$LOGNAME`, else `uid:<n>`, at
/// the host name (`alice@bastion-1`).
pub fn who() -> String {
    who_from(|k| std::env::var(k).ok(), uid, hostname)
}

/// [`who`] over a view of the environment, the uid and the host name.
fn who_from(
    env: impl Fn(&str) -> Option<String>,
    uid: impl FnOnce() -> Option<u32>,
    host: impl FnOnce() -> Option<String>,
) -> String {
    let set = |k: &str| {
        env(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let user = set("USER")
        .or_else(|| set("LOGNAME"))
        .or_else(|| uid().map(|u| format!("uid:{u}")))
        .unwrap_or_else(|| "uid:?".into());
    let host = set("HOSTNAME")
        .or_else(host)
        .unwrap_or_else(|| "localhost".into());
    // In CI, the job that acted is who acted: its URL where the CI system publishes one.
    let job = set("CI_JOB_URL") // GitLab
        .or_else(|| set("BUILD_URL")) // Jenkins
        .or_else(|| {
            // GitHub Actions
            Some(format!(
                "{}/{}/actions/runs/{}",
                set("GITHUB_SERVER_URL")?,
                set("GITHUB_REPOSITORY")?,
                set("GITHUB_RUN_ID")?
            ))
        });
    match job {
        Some(url) => format!("{user}@{host} (CI job {url})"),
        None => format!("{user}@{host}"),
    }
}

/// The audit labels every run records: who started it (the identity rule of
/// operator commands) and this binary's version.
pub fn audit_labels() -> Vec<(String, String)> {
    vec![
        ("started-by".to_string(), who()),
        ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
    ]
}

/// This process's real uid: from /proc, else the owner of a file it creates.
fn uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse().ok())
        })
        .or_else(created_file_owner)
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Without /proc: a new file belongs to the process's (effective) uid.
#[cfg(unix)]
fn created_file_owner() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let p = std::env::temp_dir().join(format!(".hcp-workflow-who-{}", uuid::Uuid::new_v4()));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .ok()?;
    let uid = f.metadata().ok().map(|m| m.uid());
    let _ = std::fs::remove_file(&p);
    uid
}

#[cfg(not(unix))]
fn created_file_owner() -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::who_from;
    use crate::style::env_of as env;

    #[test]
    fn who_is_user_then_logname_then_uid() {
        let host = || Some("bastion".to_string());
        let uid = || Some(1000);
        let both = [("USER", "bob"), ("LOGNAME", "alice")];
        assert_eq!(who_from(env(&both), uid, host), "bob@bastion");
        let logname = [("USER", ""), ("LOGNAME", "alice")];
        assert_eq!(who_from(env(&logname), uid, host), "alice@bastion");
        assert_eq!(who_from(env(&[]), uid, host), "uid:1000@bastion");
        let named_host = [("HOSTNAME", "h1")];
        assert_eq!(who_from(env(&named_host), uid, host), "uid:1000@h1");
        assert_eq!(who_from(env(&[]), || None, || None), "uid:?@localhost");
    }

    /// In CI the job is named by its URL (GitHub Actions, GitLab, Jenkins).
    #[test]
    fn in_ci_who_names_the_job() {
        let host = || Some("runner-7".to_string());
        let uid = || Some(1001);
        let gh = [
            ("USER", "runner"),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "acme/fleet"),
            ("GITHUB_RUN_ID", "42"),
        ];
        assert_eq!(
            who_from(env(&gh), uid, host),
            "runner@runner-7 (CI job https://github.com/acme/fleet/actions/runs/42)"
        );
        let gl = [
            ("USER", "gitlab"),
            ("CI_JOB_URL", "https://gitlab.example/j/9"),
        ];
        assert_eq!(
            who_from(env(&gl), uid, host),
            "gitlab@runner-7 (CI job https://gitlab.example/j/9)"
        );
        // A partial GitHub environment names no job.
        let partial = [("USER", "x"), ("GITHUB_RUN_ID", "42")];
        assert_eq!(who_from(env(&partial), uid, host), "x@runner-7");
    }
}
