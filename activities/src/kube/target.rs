//! Which management cluster to talk to, and building a kube-rs client for it.
//!
//! A run journals its [`KubeTarget`] so a resumed run reaches the same cluster. Errors name
//! the kubeconfig file and context that were tried and say what to fix (a missing context
//! lists the ones that exist), because "failed to load current context" alone sends people
//! digging through kube-rs sources.

use std::fmt;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use serde::{Deserialize, Serialize};

use super::error::KubeError;

/// A management cluster.
///
/// Serialized tagged by `type`: `{"type":"kubeconfig","path":"/k","context":"c"}`,
/// `{"type":"in-cluster"}`, `{"type":"endpoint","url":"http://127.0.0.1:8080"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum KubeTarget {
    /// A kubeconfig file; `path: None` means `$KUBECONFIG` (merged, as kubectl does) or
    /// `~/.kube/config`; `context: None` means the file's `current-context`.
    Kubeconfig {
        /// Kubeconfig file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        /// Context to use.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
    },
    /// The service account of the pod this process runs in.
    InCluster,
    /// An explicit API server URL without authentication (the simulator, a `kubectl proxy`).
    Endpoint {
        /// `http://127.0.0.1:8080`.
        url: String,
    },
}

impl fmt::Display for KubeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeTarget::Kubeconfig { path, context } => {
                write!(f, "kubeconfig {}", describe_path(path.as_deref()))?;
                if let Some(c) = context {
                    write!(f, " context {c:?}")?;
                }
                Ok(())
            }
            KubeTarget::InCluster => f.write_str("in-cluster service account"),
            KubeTarget::Endpoint { url } => write!(f, "endpoint {url}"),
        }
    }
}

/// How a kubeconfig location reads in messages.
fn describe_path(path: Option<&Path>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(v) => format!("$KUBECONFIG ({})", v.to_string_lossy()),
            None => "~/.kube/config (default; $KUBECONFIG is not set)".to_string(),
        },
    }
}

/// The kube-rs configuration for `target`, with kube-rs' in-memory retry of 429/503/504
/// turned off (the engine retries durably).
///
/// # Errors
/// [`KubeError::Kubeconfig`] (file unreadable, not YAML, no such context, no current
/// context, no server URL), [`KubeError::InCluster`], [`KubeError::Endpoint`]; all
/// classified as configuration errors (permanent).
pub async fn config(target: &KubeTarget) -> Result<kube::Config, KubeError> {
    let mut config = base_config(target).await?;
    // kube-rs 5 retries 429/503/504 in memory by default (up to 15 times, honouring
    // Retry-After, backing off up to 1000 s). A step must not sit in such a loop: the
    // error goes back to the engine (classified, with the server's delay) and the engine
    // schedules the retry durably.
    config.default_retry = false;
    Ok(config)
}

async fn base_config(target: &KubeTarget) -> Result<kube::Config, KubeError> {
    match target {
        KubeTarget::Kubeconfig { path, context } => {
            kubeconfig_config(path.as_deref(), context.as_deref()).await
        }
        KubeTarget::InCluster => kube::Config::incluster().map_err(|e| KubeError::InCluster {
            message: e.to_string(),
        }),
        KubeTarget::Endpoint { url } => {
            let endpoint_err = |message: String| KubeError::Endpoint {
                url: url.clone(),
                message,
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(endpoint_err(
                    "the URL has no http:// or https:// scheme".into(),
                ));
            }
            let uri = url.parse().map_err(|e| endpoint_err(format!("{e}")))?;
            Ok(kube::Config::new(uri))
        }
    }
}

async fn kubeconfig_config(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, KubeError> {
    let where_ = describe_path(path);
    let err = |message: String, hint: &str| KubeError::Kubeconfig {
        path: where_.clone(),
        context: context.map(str::to_string),
        message,
        hint: hint.to_string(),
    };
    let kc = match path {
        Some(p) => Kubeconfig::read_from(p),
        None => Kubeconfig::read(),
    }
    .map_err(|e| match e {
        KubeconfigError::FindPath => err(
            "no kubeconfig found".into(),
            "set KUBECONFIG, create ~/.kube/config, or give the kubeconfig path explicitly",
        ),
        KubeconfigError::ReadConfig(io, _) => err(
            format!("cannot read it: {io}"),
            "check the path and its permissions",
        ),
        other => err(
            other.to_string(),
            "check the file with `kubectl config view --kubeconfig <path>`",
        ),
    })?;
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let available = if names.is_empty() {
        "the file defines no contexts".to_string()
    } else {
        format!("available contexts: {}", names.join(", "))
    };
    match context {
        Some(c) if !names.contains(&c) => {
            return Err(err(
                format!("there is no context {c:?} ({available})"),
                "pick one of the available contexts",
            ));
        }
        None if kc.current_context.as_deref().is_none_or(str::is_empty) => {
            return Err(err(
                format!("no context given and the file has no current-context ({available})"),
                "name a context explicitly or run `kubectl config use-context <name>`",
            ));
        }
        _ => {}
    }
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        cluster: None,
        user: None,
    };
    kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| {
            err(
                e.to_string(),
                "check the context's cluster (server URL, certificate authority) and user entries",
            )
        })
}

/// A kube-rs client for `target`. Installs the process TLS crypto provider first.
///
/// # Errors
/// Those of [`config`], and [`KubeError::Client`] when the client cannot be built.
pub async fn client(target: &KubeTarget) -> Result<kube::Client, KubeError> {
    crate::tls::install_crypto_provider();
    let config = config(target).await?;
    kube::Client::try_from(config).map_err(|source| KubeError::Client {
        target: target.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_shape_is_tagged() {
        let t = KubeTarget::Kubeconfig {
            path: Some("/k".into()),
            context: Some("c".into()),
        };
        assert_eq!(
            serde_json::to_value(&t).ok(),
            Some(serde_json::json!({"type": "kubeconfig", "path": "/k", "context": "c"}))
        );
        let back: Result<KubeTarget, _> =
            serde_json::from_value(serde_json::json!({"type": "kubeconfig"}));
        assert_eq!(
            back.ok(),
            Some(KubeTarget::Kubeconfig {
                path: None,
                context: None
            })
        );
        assert_eq!(
            serde_json::to_value(KubeTarget::InCluster).ok(),
            Some(serde_json::json!({"type": "in-cluster"}))
        );
        let e = KubeTarget::Endpoint {
            url: "http://127.0.0.1:1".into(),
        };
        assert_eq!(
            serde_json::to_value(&e).ok(),
            Some(serde_json::json!({"type": "endpoint", "url": "http://127.0.0.1:1"}))
        );
    }
}
