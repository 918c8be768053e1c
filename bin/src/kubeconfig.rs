//! `hcp-workflow kubeconfig cluster/NAME`: the hosted cluster's admin kubeconfig, read from
//! the management cluster the way HyperShift publishes it (the HostedCluster's
//! `status.kubeconfig` names a Secret in its namespace, key `kubeconfig`), written to
//! stdout or to a file only its owner can read. Read-only: nothing is journaled.
//!
//! The kubeconfig carries the cluster's admin credential, so it goes only where the user
//! asked for it: it is held in a [`Secret`] (which prints `[redacted]`), never logged, and
//! no error message quotes it.

use crate::output::Refused;
use anyhow::{Context, Result};
use hcp_activities::kube::Kind;
use hcp_activities::secret::Secret;
use hcp_activities::steps::Clients;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The key of the admin kubeconfig Secret HyperShift writes the kubeconfig under.
const KUBECONFIG_KEY: &str = "kubeconfig";

#[derive(clap::Args, Debug)]
pub struct KubeconfigArgs {
    /// The cluster: `cluster/<name>`, or a run of it (id or unique prefix).
    #[arg(value_name = "cluster/NAME|RUN", add = crate::complete::runs())]
    target: String,
    /// Write the kubeconfig to this file (created or replaced, mode 0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    output_file: Option<PathBuf>,
}

/// `kubeconfig`: exit 0 with the kubeconfig written, 2 (nothing written) when the cluster
/// does not exist in the journal or HyperShift has not published its kubeconfig yet.
pub async fn kubeconfig(
    db: &str,
    reach_args: &crate::reach::ReachArgs,
    a: KubeconfigArgs,
) -> Result<u8> {
    let store = match crate::services::open_existing_store_read_only(db).await {
        Ok(s) => s,
        // No journal holds no cluster: say so about the cluster asked for.
        Err(e)
            if e.is::<crate::services::store::NoJournal>()
                || e.is::<crate::services::store::Unmigrated>() =>
        {
            let name = a.target.strip_prefix("cluster/").unwrap_or(&a.target);
            return Err(Refused::input(format!(
                "cluster {name} does not exist: {e}"
            )));
        }
        Err(e) => return Err(e),
    };
    let name = crate::verify::cluster_of(&store, db, &a.target).await?;
    let Some((ap, cfg)) = crate::verify::applied_config_opt(&store, &name).await? else {
        let standing = crate::standing::load(&store, &name, None).await?;
        if let Some(sentence) = crate::standing::partially_deleted(&standing.state, None) {
            return Err(Refused::input(format!(
                "cluster {name}: no kubeconfig to give: {sentence}"
            )));
        }
        return Err(Refused::input(format!(
            "cluster {name} does not exist in {}: no succeeded create or update of it (never created, still being created, or deleted since); `hcp-workflow clusters` lists what exists",
            crate::services::store::shown_url(db)
        )));
    };
    let (reach, _sim) = crate::reach::reach_for(reach_args, db, Some(&cfg)).await?;
    let simulated = !matches!(reach, hcp_activities::steps::Reach::Direct);
    let layout = hcp_workflows::layout::Layout::new(&cfg, &ap.infra, simulated);
    let ns = hcp_workflows::layout::CLUSTERS_NAMESPACE;
    let clients = Clients::new(reach);
    let mgmt = clients
        .mgmt(&layout.mgmt)
        .await
        .map_err(|e| anyhow::anyhow!("cluster {name}: reaching the management cluster: {e}"))?;
    let hc = mgmt
        .get(Kind::HostedCluster, ns, &name)
        .await
        .with_context(|| format!("cluster {name}: reading HostedCluster {ns}/{name}"))?;
    let Some(hc) = hc else {
        return Err(Refused::input(format!(
            "cluster {name} has no kubeconfig: the management cluster has no HostedCluster {ns}/{name} (removed outside hcp-workflow? `hcp-workflow verify cluster/{name}` compares it with the journal)"
        )));
    };
    // HyperShift names the Secret in the HostedCluster's status once it has copied it out
    // of the control plane's namespace; until then there is nothing to hand out.
    let Some(secret) = hc
        .data
        .pointer("/status/kubeconfig/name")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
    else {
        return Err(Refused::input(format!(
            "cluster {name} has no kubeconfig yet: HostedCluster {ns}/{name} does not name its admin kubeconfig Secret (HyperShift publishes it once the control plane is up); try again later, `hcp-workflow watch cluster/{name}` follows its run"
        )));
    };
    let data = mgmt
        .get_secret_data(ns, &secret, KUBECONFIG_KEY)
        .await
        .with_context(|| format!("cluster {name}: reading Secret {ns}/{secret}"))?;
    let Some(data) = data.filter(|d| !d.expose().is_empty()) else {
        return Err(Refused::input(format!(
            "cluster {name} has no kubeconfig yet: Secret {ns}/{secret} (key `{KUBECONFIG_KEY}`) does not exist or is empty on the management cluster"
        )));
    };
    match &a.output_file {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(data.expose())
                .and_then(|()| out.flush())
                .context("writing the kubeconfig to stdout")?;
        }
        Some(path) => {
            write_private(path, &data)?;
            eprintln!(
                "wrote the admin kubeconfig of cluster {name} to {} (mode 0600)",
                path.display()
            );
        }
    }
    Ok(0)
}

/// Write `data` to `path` so that no one but its owner can ever read it: a new file in the
/// same directory, created with mode 0600, then renamed over `path` (an existing file's
/// looser mode is never kept, and a reader never sees half a kubeconfig).
fn write_private(path: &Path, data: &Secret<Vec<u8>>) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .ok_or_else(|| {
            Refused::input(format!("--output-file {}: not a file name", path.display()))
        })?;
    let tmp = dir.join(format!(
        ".{file_name}.{}.tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data.expose())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(
            anyhow::Error::new(e).context(format!("writing the kubeconfig to {}", path.display()))
        );
    }
    Ok(())
}
