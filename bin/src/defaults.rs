//! A team's defaults: a config file for the values every command of a team
//! would otherwise repeat. Which file: `HCP_WORKFLOW_CONFIG`, else
//! `$XDG_CONFIG_HOME/hcp-workflow/config.yaml`, else `~/.config/hcp-workflow/config.yaml`
//! (none is needed).
//!
//! ```yaml
//! database: postgres://hcp@db.example:5432/hcp?sslmode=require
//! simulator: http://127.0.0.1:8080      # a `simulator serve` to run against (optional)
//! notify:                               # `worker --notify`
//!   - https://hooks.slack.com/services/T…/B…/…
//! ```
//!
//! Precedence: a flag, then its environment variable (`HCP_WORKFLOW_DATABASE_URL`,
//! `HCP_WORKFLOW_NOTIFY`), then this file, then the built-in default (`sqlite://./
//! hcp-workflow.db`: a journal in the current directory). The values become clap's
//! defaults, hidden from `--help` (a database URL may carry a password).

use serde::Deserialize;
use std::path::PathBuf;

/// The file's keys; any other key is refused (a typo would silently do nothing).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// `--database`.
    pub database: Option<String>,
    /// `--simulator`.
    pub simulator: Option<String>,
    /// `worker --notify`, each URL.
    pub notify: Option<Vec<String>>,
}

/// The config file this process reads, whether or not it exists.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("HCP_WORKFLOW_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("hcp-workflow").join("config.yaml"))
}

/// The config file's path, for messages.
pub fn path_hint() -> String {
    path().map_or_else(
        || "$XDG_CONFIG_HOME/hcp-workflow/config.yaml".to_string(),
        |p| p.display().to_string(),
    )
}

/// The defaults of the config file, if there is one. `Err`: the message for a file that is
/// there but unreadable or wrong (exit 2: bad input), naming the file and the fix.
pub fn load() -> Result<Option<Defaults>, String> {
    let Some(path) = path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if std::env::var_os("HCP_WORKFLOW_CONFIG").is_some() => {
            return Err(if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "HCP_WORKFLOW_CONFIG: no file at {}: fix the path or unset it",
                    path.display()
                )
            } else {
                format!("HCP_WORKFLOW_CONFIG: {}: {e}", path.display())
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // The default place, not readable by this user (another user's home, as when an
        // operator runs a read-only command under another uid): no defaults, and a word
        // when the file itself is there.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            if path.parent().is_some_and(|d| std::fs::read_dir(d).is_ok()) {
                eprintln!(
                    "warning: config file {} cannot be read ({e}): its defaults are not used",
                    path.display()
                );
            }
            return Ok(None);
        }
        Err(e) => return Err(format!("config file {}: {e}", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(Some(Defaults::default()));
    }
    let d: Defaults = serde_norway::from_str(&text).map_err(|e| {
        format!(
            "config file {}: {e}\nits keys are database (a journal URL), simulator (a URL) and notify (a list of URLs); fix or remove it",
            path.display()
        )
    })?;
    for (key, v) in [("database", &d.database), ("simulator", &d.simulator)] {
        if v.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(format!(
                "config file {}: `{key}` is empty: give a value or remove the key",
                path.display()
            ));
        }
    }
    Ok(Some(d))
}

/// `cmd` with the file's values as its defaults.
pub fn apply(mut cmd: clap::Command, d: &Defaults) -> clap::Command {
    // clap keeps defaults as `&'static str` here: one small leak per process start.
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    if let Some(db) = &d.database {
        let v = leak(db);
        cmd = cmd.mut_arg("database", |a| a.default_value(v).hide_default_value(true));
    }
    if let Some(sim) = &d.simulator {
        let v = leak(sim);
        cmd = cmd.mut_arg("simulator", |a| a.default_value(v));
    }
    if let Some(urls) = &d.notify
        && !urls.is_empty()
    {
        let v: Vec<&'static str> = urls.iter().map(|u| leak(u)).collect();
        cmd = cmd.mut_subcommand("worker", |w| {
            w.mut_arg("notify", |a| a.default_values(v).hide_default_value(true))
        });
    }
    cmd
}
