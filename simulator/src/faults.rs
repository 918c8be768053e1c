//! Fault injection rules (`POST /_sim/faults`).
//!
//! A rule matches requests by method, path and/or resource type, fires on the nth match,
//! with a probability, or on every match (bounded by `times`), and then answers with an
//! error, delays the request, drops the connection, or lets an ARM long-running operation
//! start normally but end `Failed`. See the crate docs for the JSON shape.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// One fault rule. All matchers that are set must match; unset matchers match anything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Assigned by the simulator; ignored on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// HTTP method (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Substring of the path-and-query, or a glob (`*` = any run) over it, case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// ARM resource type (`Microsoft.Network/privateLinkServices`) or Kubernetes
    /// `<group>/<plural>` the request addresses, case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// Fire starting at the nth matching request (1-based); with `times` unset, only once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    /// Fire on each matching request with this probability (seeded generator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// Maximum number of firings (default: 1 with `nth`, unlimited otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u64>,
    /// Status to answer with (the request is not processed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Error code in the body and `x-ms-error-code` (default derived from the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Error message (default: "injected fault").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `Retry-After` seconds sent with the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// Delay (real milliseconds) before the request is answered or processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Abort the connection instead of answering.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_connection: bool,
    /// Process the request, but make the ARM long-running operation it starts end
    /// `Failed` with `error_code`/`message` (no effect on synchronous requests).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_async: bool,
}

/// What a firing rule does to the request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FaultAction {
    /// Only the latency (if any) applies; process normally.
    Pass,
    Respond {
        status: u16,
        code: String,
        message: String,
        retry_after: Option<u64>,
    },
    Drop,
    FailAsync {
        code: String,
        message: String,
    },
}

/// Result of evaluating the rules for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FaultHit {
    pub latency_ms: u64,
    pub action: FaultAction,
}

#[derive(Debug)]
struct Armed {
    rule: FaultRule,
    seen: u64,
    fired: u64,
}

/// The active rules.
#[derive(Debug)]
pub(crate) struct FaultEngine {
    rules: Vec<Armed>,
    next_id: u64,
    rng: StdRng,
}

impl FaultEngine {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rules: Vec::new(),
            next_id: 1,
            rng: StdRng::seed_from_u64(seed ^ 0xfa17),
        }
    }

    pub(crate) fn add(&mut self, mut rule: FaultRule) -> Result<String, String> {
        if let Some(p) = rule.probability
            && !(0.0..=1.0).contains(&p)
        {
            return Err(format!("probability must be within 0..=1, got {p}"));
        }
        if rule.nth == Some(0) {
            return Err("nth is 1-based".into());
        }
        if rule.nth.is_some() && rule.probability.is_some() {
            return Err("use either nth or probability, not both".into());
        }
        if let Some(s) = rule.status
            && !(100..=599).contains(&s)
        {
            return Err(format!("status {s} is not an HTTP status"));
        }
        if rule.status.is_none()
            && rule.latency_ms.is_none()
            && !rule.drop_connection
            && !rule.fail_async
        {
            return Err("a rule needs status, latency_ms, drop_connection or fail_async".into());
        }
        if rule.fail_async && rule.error_code.is_none() {
            return Err("fail_async needs error_code".into());
        }
        let id = format!("fault-{}", self.next_id);
        self.next_id += 1;
        rule.id = Some(id.clone());
        self.rules.push(Armed {
            rule,
            seen: 0,
            fired: 0,
        });
        Ok(id)
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    pub(crate) fn remove(&mut self, id: &str) -> bool {
        let before = self.rules.len();
        self.rules.retain(|a| a.rule.id.as_deref() != Some(id));
        before != self.rules.len()
    }

    pub(crate) fn list(&self) -> Vec<FaultRule> {
        self.rules.iter().map(|a| a.rule.clone()).collect()
    }

    /// Evaluates the rules in insertion order; the first firing rule wins.
    pub(crate) fn check(
        &mut self,
        method: &str,
        path: &str,
        rtype: Option<&str>,
    ) -> Option<FaultHit> {
        for armed in &mut self.rules {
            let r = &armed.rule;
            if let Some(m) = &r.method
                && !m.eq_ignore_ascii_case(method)
            {
                continue;
            }
            if let Some(p) = &r.path {
                let ok = if p.contains('*') {
                    crate::util::glob(p, path)
                        || crate::util::glob(p, path.split('?').next().unwrap_or(path))
                } else {
                    path.to_ascii_lowercase().contains(&p.to_ascii_lowercase())
                };
                if !ok {
                    continue;
                }
            }
            if let Some(t) = &r.resource_type
                && !rtype.is_some_and(|x| x.eq_ignore_ascii_case(t))
            {
                continue;
            }
            armed.seen += 1;
            let limit = r
                .times
                .unwrap_or(if r.nth.is_some() { 1 } else { u64::MAX });
            if armed.fired >= limit {
                continue;
            }
            let fire = if let Some(n) = r.nth {
                armed.seen >= n
            } else if let Some(p) = r.probability {
                self.rng.random_bool(p)
            } else {
                true
            };
            if !fire {
                continue;
            }
            armed.fired += 1;
            let code = r
                .error_code
                .clone()
                .unwrap_or_else(|| default_code(r.status.unwrap_or(500)));
            let message = r
                .message
                .clone()
                .unwrap_or_else(|| "injected fault".to_string());
            let action = if r.drop_connection {
                FaultAction::Drop
            } else if r.fail_async {
                FaultAction::FailAsync { code, message }
            } else if let Some(status) = r.status {
                FaultAction::Respond {
                    status,
                    code,
                    message,
                    retry_after: r.retry_after,
                }
            } else {
                FaultAction::Pass
            };
            return Some(FaultHit {
                latency_ms: r.latency_ms.unwrap_or(0),
                action,
            });
        }
        None
    }
}

fn default_code(status: u16) -> String {
    match status {
        400 => "BadRequest",
        401 => "AuthenticationFailed",
        403 => "AuthorizationFailed",
        404 => "NotFound",
        408 => "RequestTimeout",
        409 => "Conflict",
        429 => "TooManyRequests",
        500 => "InternalServerError",
        502 => "BadGateway",
        503 => "ServiceUnavailable",
        504 => "GatewayTimeout",
        _ => "InjectedFault",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_fires_once_by_default() {
        let mut e = FaultEngine::new(1);
        let rule = FaultRule {
            method: Some("PUT".into()),
            nth: Some(2),
            status: Some(500),
            ..Default::default()
        };
        assert!(e.add(rule).is_ok());
        assert!(e.check("PUT", "/x", None).is_none());
        assert!(e.check("GET", "/x", None).is_none());
        assert!(matches!(
            e.check("PUT", "/x", None),
            Some(FaultHit {
                action: FaultAction::Respond { status: 500, .. },
                ..
            })
        ));
        assert!(e.check("PUT", "/x", None).is_none());
    }

    #[test]
    fn rejects_empty_rule() {
        let mut e = FaultEngine::new(1);
        assert!(e.add(FaultRule::default()).is_err());
    }
}
