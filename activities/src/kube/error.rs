//! Typed management-cluster errors and their classification.
//!
//! What a failed Kubernetes call means for a saga step depends on the HTTP status and the
//! `Status` reason: a 429 or 5xx clears by itself, a 409 from a concurrent writer clears on
//! the next read-modify-write, but a 422 `Invalid` (the CRD refused our object) or a
//! server-side-apply *field-manager* conflict never does and must reach a human with the
//! API server's own message. [`KubeError`] keeps the status, reason and message, and
//! [`KubeError::classify`] decides; `From<KubeError> for StepError` carries all of it into
//! the journal.

use std::time::Duration;

use hcp_runtime::StepError;
use hcp_runtime::error::kind;
use serde::{Deserialize, Serialize};

/// How a failure should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// 429: slow down, retry after the server's delay.
    Throttled,
    /// 408, 410, 5xx, connection failures, watch failures, our own wait timeout: retry.
    Transient,
    /// A conflict that clears by itself: 409 `Conflict`/`AlreadyExists` from a concurrent
    /// writer, a namespace that is still terminating.
    Conflict,
    /// 404: the object (or its namespace) does not exist.
    NotFound,
    /// 400, 422 and other 4xx: the API server refused the object; retrying cannot help.
    Validation,
    /// Server-side apply found another field manager owning fields we set. Retrying
    /// cannot help: someone else (a person with `kubectl`, another controller) changed
    /// the object, and forcing would silently overwrite them.
    FieldConflict,
    /// 401/403, or the client could not authenticate.
    Authorization,
    /// The object exists but was not created by hcp-workflow.
    NotOurs,
    /// The target cannot be reached as configured (kubeconfig, context, endpoint).
    Configuration,
}

impl ErrorClass {
    /// Whether another attempt may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Throttled | ErrorClass::Transient | ErrorClass::Conflict
        )
    }

    /// The engine's error kind for this class (see `hcp_runtime::error::kind`).
    pub fn kind(self) -> &'static str {
        match self {
            ErrorClass::Throttled => kind::THROTTLED,
            ErrorClass::Transient => kind::TRANSIENT,
            ErrorClass::Conflict | ErrorClass::FieldConflict => kind::CONFLICT,
            ErrorClass::NotFound => "not-found",
            ErrorClass::Validation => kind::VALIDATION,
            ErrorClass::Authorization => kind::AUTHORIZATION,
            ErrorClass::NotOurs => "not-ours",
            ErrorClass::Configuration => "configuration",
        }
    }
}

/// A management-cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig could not be read or does not select a usable context.
    #[error("kubeconfig {path}{}: {message}; {hint}", context.as_deref().map(|c| format!(" (context {c:?})")).unwrap_or_default())]
    Kubeconfig {
        /// Which file (or `$KUBECONFIG` / default location) was read.
        path: String,
        /// The context asked for, if any.
        context: Option<String>,
        /// What went wrong.
        message: String,
        /// What to do about it.
        hint: String,
    },
    /// The in-cluster configuration (service account token, `KUBERNETES_SERVICE_HOST`)
    /// is not available.
    #[error(
        "in-cluster Kubernetes configuration is not available: {message}; run inside a pod with a service account, or use a kubeconfig target"
    )]
    InCluster {
        /// What went wrong.
        message: String,
    },
    /// An explicit endpoint URL is unusable.
    #[error(
        "management cluster endpoint {url:?} is not usable: {message}; give an http:// or https:// URL such as http://127.0.0.1:8080"
    )]
    Endpoint {
        /// The URL as given.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// Building the client failed (TLS setup, auth plugin configuration).
    #[error("cannot build a Kubernetes client for {target}: {source}")]
    Client {
        /// The target, as [`super::KubeTarget`] displays it.
        target: String,
        /// kube-rs' error.
        #[source]
        source: kube::Error,
    },
    /// The API server answered with an error `Status`.
    #[error("{verb} {resource}: HTTP {code} {reason}: {message}")]
    Api {
        /// `get`, `apply`, `delete`, ...
        verb: &'static str,
        /// `HostedCluster clusters/demo`.
        resource: String,
        /// HTTP status.
        code: u16,
        /// `Status.reason` (`Invalid`, `Conflict`, `NotFound`, ...).
        reason: String,
        /// `Status.message`, the API server's explanation (for a 422: the CRD's message).
        message: String,
        /// `Status.details.retryAfterSeconds`, if the server asked for a delay.
        retry_after: Option<Duration>,
        /// A server-side apply conflict with another field manager.
        field_conflict: bool,
    },
    /// The request did not get an answer (connection refused, reset, TLS, auth plugin),
    /// or the answer could not be read.
    #[error("{verb} {resource}: {source}")]
    Transport {
        /// `get`, `apply`, `delete`, ...
        verb: &'static str,
        /// `HostedCluster clusters/demo`.
        resource: String,
        /// kube-rs' error.
        #[source]
        source: kube::Error,
    },
    /// The object a read needed does not exist.
    #[error("{resource} does not exist")]
    NotFound {
        /// `HostedCluster clusters/demo`.
        resource: String,
    },
    /// The object exists but does not carry our ownership labels (or carries another
    /// cluster's): we neither delete nor take it over.
    #[error(
        "{resource} exists but was not created by hcp-workflow for this cluster (labels hcp-workflow.io/cluster and hcp-workflow.io/infra-id {found}); refusing to {action} it — remove or rename it yourself if it is really stale"
    )]
    NotOurs {
        /// `Secret clusters/demo-pull-secret`.
        resource: String,
        /// What we would have done: `delete`, `overwrite`.
        action: &'static str,
        /// What the labels say (`are missing`, `say cluster=x infra-id=y`).
        found: String,
    },
    /// The object is being deleted, so it cannot be written now.
    #[error("{resource} is being deleted; retry once it is gone")]
    Terminating {
        /// `Namespace clusters`.
        resource: String,
    },
    /// An object handed to an apply operation is malformed (no name, wrong namespace).
    #[error("{resource}: {message}")]
    Invalid {
        /// What was being applied.
        resource: String,
        /// What is wrong with it.
        message: String,
    },
    /// A watch used by [`super::Mgmt::wait_deleted`] failed.
    #[error("watching {resource}: {message}")]
    Watch {
        /// What was watched.
        resource: String,
        /// kube-runtime's error.
        message: String,
    },
    /// [`super::Mgmt::wait_deleted`] ran out of time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        after: Duration,
    },
}

impl KubeError {
    /// Wraps a kube-rs error from `verb` on `resource`.
    pub(crate) fn from_kube(verb: &'static str, resource: &str, e: kube::Error) -> KubeError {
        match e {
            kube::Error::Api(status) => {
                let field_conflict = status
                    .details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "FieldManagerConflict"));
                let retry_after = status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s)));
                KubeError::Api {
                    verb,
                    resource: resource.to_string(),
                    code: status.code,
                    reason: status.reason.clone(),
                    message: status.message.clone(),
                    retry_after,
                    field_conflict,
                }
            }
            other => KubeError::Transport {
                verb,
                resource: resource.to_string(),
                source: other,
            },
        }
    }

    /// Whether the API server said 404.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            KubeError::Api { code: 404, .. } | KubeError::NotFound { .. }
        )
    }

    /// How this failure should be handled.
    pub fn classify(&self) -> ErrorClass {
        match self {
            KubeError::Kubeconfig { .. }
            | KubeError::InCluster { .. }
            | KubeError::Endpoint { .. } => ErrorClass::Configuration,
            KubeError::Client { source, .. } => match source {
                kube::Error::Auth(_) => ErrorClass::Authorization,
                _ => ErrorClass::Configuration,
            },
            KubeError::Api {
                code,
                reason,
                message,
                field_conflict,
                ..
            } => classify_status(*code, reason, message, *field_conflict),
            KubeError::Transport { source, .. } => match source {
                kube::Error::Auth(_) => ErrorClass::Authorization,
                // Our request or their answer does not fit the API: a bug, not weather.
                kube::Error::SerdeError(_)
                | kube::Error::BuildRequest(_)
                | kube::Error::HttpError(_)
                | kube::Error::FromUtf8(_) => ErrorClass::Validation,
                _ => ErrorClass::Transient,
            },
            KubeError::NotFound { .. } => ErrorClass::NotFound,
            KubeError::NotOurs { .. } => ErrorClass::NotOurs,
            KubeError::Terminating { .. } => ErrorClass::Conflict,
            KubeError::Invalid { .. } => ErrorClass::Validation,
            KubeError::Watch { .. } | KubeError::Timeout { .. } => ErrorClass::Transient,
        }
    }

    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        self.classify().is_retryable()
    }

    /// The server-requested delay before retrying, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            KubeError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A stable code for the journal: the `Status.reason` for API errors, else a name of
    /// the variant.
    pub fn code(&self) -> String {
        match self {
            KubeError::Api {
                reason,
                code,
                field_conflict,
                ..
            } => {
                if *field_conflict {
                    "FieldManagerConflict".to_string()
                } else if reason.is_empty() {
                    format!("HTTP{code}")
                } else {
                    reason.clone()
                }
            }
            KubeError::Kubeconfig { .. } => "KubeconfigInvalid".into(),
            KubeError::InCluster { .. } => "InClusterConfigUnavailable".into(),
            KubeError::Endpoint { .. } => "EndpointInvalid".into(),
            KubeError::Client { .. } => "ClientBuildFailed".into(),
            KubeError::Transport { .. } => "TransportError".into(),
            KubeError::NotFound { .. } => "NotFound".into(),
            KubeError::NotOurs { .. } => "NotOurs".into(),
            KubeError::Terminating { .. } => "Terminating".into(),
            KubeError::Invalid { .. } => "InvalidObject".into(),
            KubeError::Watch { .. } => "WatchFailed".into(),
            KubeError::Timeout { .. } => "Timeout".into(),
        }
    }
}

fn classify_status(code: u16, reason: &str, message: &str, field_conflict: bool) -> ErrorClass {
    match code {
        429 => ErrorClass::Throttled,
        408 | 410 => ErrorClass::Transient,
        409 if field_conflict => ErrorClass::FieldConflict,
        409 => ErrorClass::Conflict,
        401 => ErrorClass::Authorization,
        // Writing into a namespace that is being deleted: clears once it is gone (and the
        // next apply recreates it).
        403 if message.contains("being terminated") => ErrorClass::Conflict,
        403 => ErrorClass::Authorization,
        404 => ErrorClass::NotFound,
        500..=599 => ErrorClass::Transient,
        400..=499 => ErrorClass::Validation,
        // No usable status code: judge by the reason, default to retrying.
        _ => match reason {
            "Invalid" | "BadRequest" => ErrorClass::Validation,
            "Forbidden" | "Unauthorized" => ErrorClass::Authorization,
            "NotFound" => ErrorClass::NotFound,
            _ => ErrorClass::Transient,
        },
    }
}

impl From<KubeError> for StepError {
    fn from(e: KubeError) -> Self {
        let class = e.classify();
        let mut message = e.to_string();
        if class == ErrorClass::FieldConflict {
            message.push_str(
                " — another field manager changed fields hcp-workflow sets; inspect the object's managedFields and revert the other change, or delete the object if it is really ours",
            );
        }
        let step = if class.is_retryable() {
            StepError::retryable(class.kind(), message)
        } else {
            StepError::permanent(class.kind(), message)
        }
        .with_code(e.code());
        match e.retry_after() {
            Some(d) => step.with_retry_after(d),
            None => step,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str, field_conflict: bool) -> KubeError {
        KubeError::Api {
            verb: "apply",
            resource: "HostedCluster clusters/demo".into(),
            code,
            reason: reason.into(),
            message: message.into(),
            retry_after: None,
            field_conflict,
        }
    }

    #[test]
    fn classification_table() {
        let cases = [
            (
                api(429, "TooManyRequests", "", false),
                ErrorClass::Throttled,
                true,
            ),
            (
                api(500, "InternalError", "", false),
                ErrorClass::Transient,
                true,
            ),
            (
                api(503, "ServiceUnavailable", "", false),
                ErrorClass::Transient,
                true,
            ),
            (api(504, "Timeout", "", false), ErrorClass::Transient, true),
            (
                api(409, "Conflict", "the object has been modified", false),
                ErrorClass::Conflict,
                true,
            ),
            (
                api(409, "AlreadyExists", "", false),
                ErrorClass::Conflict,
                true,
            ),
            (
                api(409, "Conflict", "Apply failed with 1 conflict", true),
                ErrorClass::FieldConflict,
                false,
            ),
            (
                api(422, "Invalid", "spec.release.image: Required value", false),
                ErrorClass::Validation,
                false,
            ),
            (
                api(400, "BadRequest", "", false),
                ErrorClass::Validation,
                false,
            ),
            (
                api(403, "Forbidden", "cannot patch", false),
                ErrorClass::Authorization,
                false,
            ),
            (
                api(
                    403,
                    "Forbidden",
                    "unable to create new content in namespace clusters because it is being terminated",
                    false,
                ),
                ErrorClass::Conflict,
                true,
            ),
            (
                api(401, "Unauthorized", "", false),
                ErrorClass::Authorization,
                false,
            ),
            (api(404, "NotFound", "", false), ErrorClass::NotFound, false),
        ];
        for (e, class, retryable) in cases {
            assert_eq!(e.classify(), class, "{e}");
            assert_eq!(e.is_retryable(), retryable, "{e}");
        }
    }

    #[test]
    fn step_error_carries_status_reason_and_message() {
        let e = api(
            422,
            "Invalid",
            "HostedCluster.hypershift.openshift.io \"demo\" is invalid: [spec.release: Required value]",
            false,
        );
        let s: StepError = e.into();
        assert!(!s.retryable);
        assert_eq!(s.kind, kind::VALIDATION);
        assert_eq!(s.code.as_deref(), Some("Invalid"));
        assert!(s.message.contains("HTTP 422 Invalid"), "{}", s.message);
        assert!(
            s.message.contains("spec.release: Required value"),
            "{}",
            s.message
        );
        assert!(
            s.message.contains("HostedCluster clusters/demo"),
            "{}",
            s.message
        );

        let throttled = KubeError::Api {
            verb: "get",
            resource: "NodePool clusters/demo".into(),
            code: 429,
            reason: "TooManyRequests".into(),
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(3)),
            field_conflict: false,
        };
        let s: StepError = throttled.into();
        assert!(s.retryable);
        assert_eq!(s.kind, kind::THROTTLED);
        assert_eq!(s.retry_after(), Some(Duration::from_secs(3)));

        let s: StepError = api(409, "Conflict", "Apply failed", true).into();
        assert!(!s.retryable);
        assert_eq!(s.code.as_deref(), Some("FieldManagerConflict"));
        assert!(s.message.contains("managedFields"));
    }

    #[test]
    fn not_ours_is_permanent_and_explains() {
        let e = KubeError::NotOurs {
            resource: "Secret clusters/x".into(),
            action: "delete",
            found: "are missing".into(),
        };
        assert_eq!(e.classify(), ErrorClass::NotOurs);
        let s: StepError = e.into();
        assert!(!s.retryable);
        assert_eq!(s.code.as_deref(), Some("NotOurs"));
        assert!(s.message.contains("refusing to delete"));
    }
}
