//! `plan`: what a workflow will do, read off its DAG, touching nothing.
//!
//! For each step: its stage, its action, the resources it targets (Azure ids or Kubernetes
//! objects, from the node's journaled input) and whether it has an undo; then the undo
//! plan: the order compensations would run in if the last step failed.

use hcp_runtime::SagaDag;
use serde::Serialize;
use serde_json::Value;

/// One planned step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlannedStep {
    /// Node name.
    pub node: String,
    /// Stage.
    pub stage: String,
    /// Action name.
    pub action: String,
    /// Nodes it waits for.
    pub after: Vec<String>,
    /// What it touches.
    pub resources: Vec<String>,
    /// Whether unwinding would undo it.
    pub has_undo: bool,
    /// Set on a pivot: why it cannot be undone (the undo plan stops at it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pivot: Option<String>,
}

/// A plan.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Plan {
    /// Workflow.
    pub workflow: String,
    /// The cluster's name (set by the caller).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The cluster's infra id (set by the caller; `<name>-<generated>` before a create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_id: Option<String>,
    /// Stages in order.
    pub stages: Vec<String>,
    /// Steps in DAG order.
    pub steps: Vec<PlannedStep>,
    /// Undo order if everything had run and then failed (reverse dependency order),
    /// stopping at the last pivot: nothing at or before it is ever undone.
    pub undo: Vec<String>,
    /// Steps with an undo that a pivot comes after: undone (in this order) only when the
    /// failure comes before that pivot succeeded; kept once it has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undo_before_pivot: Vec<String>,
    /// The run's failure policy (`unwind`, `pause`, `pause=24h`).
    pub on_failure: String,
    /// Every step is a pivot: the workflow only goes forward.
    pub forward_only: bool,
}

fn resources(input: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(id) = s("id") {
        out.push(id);
    }
    if let (Some(vnet), Some(name)) = (s("vnet_id"), s("name")) {
        out.push(format!("{vnet}/subnets/{name}"));
    }
    if let (Some(zone), Some(names)) = (s("zone_id"), input.get("names").and_then(Value::as_array))
    {
        for n in names.iter().filter_map(Value::as_str) {
            out.push(format!("{zone}/A/{n}"));
        }
    }
    if let Some(subjects) = input.get("subjects").and_then(Value::as_array) {
        for sub in subjects {
            if let Some(n) = sub.get("name").and_then(Value::as_str) {
                out.push(format!("federated credential {n}"));
            }
        }
    }
    if let (Some(scope), Some(role), Some(c)) = (s("scope"), s("role"), s("component")) {
        let role = match hcp_activities::azure::names::roles::name(&role) {
            Some(n) => format!("\"{n}\" ({role})"),
            None => role,
        };
        let scope = if scope.is_empty() {
            "the public DNS zone's resource group (found when the run starts)".to_string()
        } else {
            scope
        };
        out.push(format!("role {role} for {c} on {scope}"));
    }
    if let (Some(ns), Some(secret)) = (s("namespace"), s("secret")) {
        out.push(format!("Secret {ns}/{secret}"));
    }
    if let Some(spec) = input.get("spec") {
        let kind = if spec.get("cluster_name").is_some() {
            "NodePool"
        } else {
            "HostedCluster"
        };
        if let (Some(ns), Some(name)) = (
            spec.get("namespace").and_then(Value::as_str),
            spec.get("name").and_then(Value::as_str),
        ) {
            out.push(format!("{kind} {ns}/{name}"));
        }
    }
    if let (Some(ns), Some(names), Some(kind)) = (
        s("namespace"),
        input.get("names").and_then(Value::as_array),
        s("kind"),
    ) {
        for n in names.iter().filter_map(Value::as_str) {
            out.push(format!("{kind} {ns}/{n}"));
        }
    }
    if s("pull_secret").is_some() {
        for k in ["pull_secret", "ssh_key", "etcd_key"] {
            if let (Some(ns), Some(n)) = (s("namespace"), s(k)) {
                out.push(format!("Secret {ns}/{n}"));
            }
        }
    }
    if let (Some(container), Some(account)) = (s("container"), s("account_id")) {
        out.push(format!(
            "{account}/blobServices/default/containers/{container}: .well-known/openid-configuration, openid/v1/jwks"
        ));
    }
    if let (Some(kind), Some(name), Some(c)) = (s("kind"), s("name"), s("condition")) {
        out.push(format!("wait for {kind} {name} {c}=True"));
    }
    aro_resources(input, &mut out);
    out
}

/// The ARO HCP identity model's Entra and Key Vault objects (`steps::aro_identity`).
fn aro_resources(input: &Value, out: &mut Vec<String>) {
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let node = |k: &str| {
        input
            .get(k)
            .and_then(|r| r.get("$ref"))
            .and_then(Value::as_str)
            .map(|n| n.rsplit('.').nth(1).unwrap_or(n).to_string())
    };
    match (s("unique_name"), s("display_name")) {
        (Some(unique), Some(display)) => out.push(format!(
            "Entra application {display} (uniqueName {unique}), owned by the caller"
        )),
        (Some(unique), None) => out.push(format!(
            "Entra application uniqueName {unique} and its service principal (only if this cluster's)"
        )),
        _ => {}
    }
    let has = |k: &str| input.get(k).is_some();
    let vault = has("vault");
    match (node("application"), node("certificate")) {
        (Some(app), None) if !vault => {
            out.push(format!("service principal of the {app} application"));
        }
        (Some(app), Some(_)) if !vault => {
            out.push(format!(
                "key credential of the {app} application: the certificate's public key"
            ));
        }
        (Some(_), Some(_)) => out.push(format!(
            "Key Vault secret {} (msi-dataplane credentials JSON HyperShift mounts)",
            s("name").unwrap_or_else(|| "<certificate>-json".into())
        )),
        _ => {}
    }
    if let (true, Some(subject), Some(name)) = (vault, s("subject"), s("name")) {
        out.push(format!(
            "Key Vault certificate {name} ({subject}, RSA 2048, self-signed, {} months; its private key is made in Key Vault)",
            input
                .get("validity_months")
                .and_then(Value::as_u64)
                .unwrap_or(12)
        ));
    }
    if let (Some(name), Some(v)) = (s("name"), s("vault"))
        && !has("subject")
    {
        out.push(format!("Key Vault object {name} in {v}"));
    }
}

/// The plan of `dag`.
pub fn plan(dag: &SagaDag) -> Plan {
    let steps: Vec<PlannedStep> = dag
        .nodes
        .iter()
        .map(|n| PlannedStep {
            node: n.name.clone(),
            stage: n.stage.clone(),
            action: n.action.clone(),
            after: n.deps.clone(),
            resources: {
                let mut r = resources(&n.input);
                if let Some(f) = hcp_activities::steps::facts_of(&n.action) {
                    r.extend(f.plan(&n.input));
                }
                r
            },
            has_undo: n.has_undo,
            pivot: n.pivot.clone(),
        })
        .collect();
    // Reverse of a topological order: nodes are added in dependency order by the builder.
    // Past the last pivot nothing is undone: only what descends from every pivot is.
    let pivots: Vec<usize> = (0..dag.nodes.len())
        .filter(|&i| dag.nodes[i].pivot.is_some())
        .collect();
    let undo = dag
        .nodes
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, n)| n.has_undo && pivots.iter().all(|&p| dag.descends_from(*i, p)))
        .map(|(_, n)| n.name.clone())
        .collect::<Vec<_>>();
    let undo_before_pivot = dag
        .nodes
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, n)| {
            n.has_undo
                && !undo.contains(&n.name)
                && !pivots.iter().any(|&p| dag.descends_from(*i, p))
        })
        .map(|(_, n)| n.name.clone())
        .collect();
    Plan {
        workflow: dag.workflow.clone(),
        cluster: None,
        infra_id: None,
        stages: dag.stages.clone(),
        steps,
        undo,
        undo_before_pivot,
        on_failure: dag.on_failure.to_string(),
        forward_only: dag.forward_only(),
    }
}

impl Plan {
    /// Human-readable rendering.
    pub fn render(&self) -> String {
        self.render_with(&|_| None)
    }

    /// [`Plan::render`], marking each resource `exists(resource)` knows about (the
    /// journal's inventory: "exists, made by run …").
    pub fn render_with(&self, exists: &dyn Fn(&str) -> Option<String>) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let of = match (&self.cluster, &self.infra_id) {
            (Some(c), Some(i)) => format!(" of cluster {c} (infra id {i})"),
            (Some(c), None) => format!(" of cluster {c}"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "Plan for {}{of}: {} steps",
            self.workflow,
            self.steps.len()
        );
        for stage in &self.stages {
            let _ = writeln!(s, "\n[{stage}]");
            for st in self.steps.iter().filter(|x| &x.stage == stage) {
                let undo = match &st.pivot {
                    Some(why) => format!("  ⚑ pivot: {why}"),
                    None if st.has_undo => String::new(),
                    None => "  (no undo)".into(),
                };
                let _ = writeln!(s, "  {}  ({}){undo}", st.node, st.action);
                for r in &st.resources {
                    match exists(r) {
                        Some(note) => {
                            let _ = writeln!(s, "      {r}  [{note}]");
                        }
                        None => {
                            let _ = writeln!(s, "      {r}");
                        }
                    }
                }
            }
        }
        if self.forward_only {
            let _ = writeln!(
                s,
                "\n{} only goes forward: every step is a pivot (a deletion cannot be undone). If a step fails for good the run pauses there; what is already deleted stays deleted, and `hcp-workflow retry RUN` continues the delete.",
                self.workflow
            );
        } else if self.undo.is_empty() && !self.undo_before_pivot.is_empty() {
            let when = match self.on_failure.as_str() {
                "unwind" => "If a step fails before a pivot has succeeded (on-failure=unwind), completed steps are undone in this order".to_string(),
                p => format!("If a step fails before a pivot has succeeded (on-failure={p}) the run pauses; `cancel` (or the deadline) undoes completed steps in this order"),
            };
            let _ = writeln!(s, "\n{when}:");
            for (i, u) in self.undo_before_pivot.iter().enumerate() {
                let _ = writeln!(s, "  {:>2}. {u}", i + 1);
            }
            let _ = writeln!(
                s,
                "Once a pivot (⚑) has succeeded, nothing is undone: a failure pauses the run with its work kept, for `hcp-workflow retry RUN`."
            );
        } else if self.undo.is_empty() && self.steps.iter().any(|x| x.pivot.is_some()) {
            let _ = writeln!(
                s,
                "\nNo step of {} can be undone once its pivots (⚑) ran. If a step fails for good the run pauses there with its work kept, for `hcp-workflow retry RUN`.",
                self.workflow
            );
        } else if self.undo.is_empty() {
            let _ = writeln!(
                s,
                "\nNo step of {} has an undo. If a step fails for good the run ends there.",
                self.workflow
            );
        } else {
            let when = match self.on_failure.as_str() {
                "unwind" => {
                    "If a step fails (on-failure=unwind), completed steps are undone in this order"
                        .to_string()
                }
                p => format!(
                    "If a step fails (on-failure={p}) the run pauses and keeps its work; `cancel` (or the deadline) undoes completed steps in this order"
                ),
            };
            let stops = if self.steps.iter().any(|x| x.pivot.is_some()) {
                " (it stops at the last pivot that succeeded: nothing at or before it is undone)"
            } else {
                ""
            };
            let _ = writeln!(s, "\n{when}{stops}:");
            for (i, u) in self.undo.iter().enumerate() {
                let _ = writeln!(s, "  {:>2}. {u}", i + 1);
            }
        }
        s
    }
}
