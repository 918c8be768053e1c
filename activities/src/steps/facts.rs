//! What a step declares about itself, read without running it: the ARM actions it performs
//! (`preflight` checks the caller holds them), the wait-budget class of its action and of
//! its undo (`budgets::apply` in hcp-workflows), and what it changes in a plan's words.
//! Each action type declares them beside its `retry_policy()` ([`Facts`]); [`catalog`]
//! reads them from the same list of types [`super::register`] registers, so a registered
//! step without them does not compile.

use hcp_runtime::Action;
use serde_json::Value;

/// Which of a workflow's wait budgets (`waitBudgets` in the cluster file) bounds a step's
/// durable polling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitClass {
    /// One Azure resource's long-running operation (the default).
    ArmOperation,
    /// HostedCluster `Available`, and what HyperShift makes while it comes up.
    HostedClusterAvailable,
    /// The guest's rollout of a release.
    ClusterRollout,
    /// A NodePool's machines becoming ready.
    NodePoolReady,
    /// A Kubernetes object's finalizers.
    KubernetesDeletion,
    /// HyperShift's and Azure's private-link teardown.
    PrivateLinkTeardown,
}

impl WaitClass {
    /// Its key in `waitBudgets`.
    pub fn key(self) -> &'static str {
        match self {
            Self::ArmOperation => "armOperation",
            Self::HostedClusterAvailable => "hostedClusterAvailable",
            Self::ClusterRollout => "clusterRollout",
            Self::NodePoolReady => "nodePoolReady",
            Self::KubernetesDeletion => "kubernetesDeletion",
            Self::PrivateLinkTeardown => "privateLinkTeardown",
        }
    }
}

/// A step's declarations.
pub trait Facts: Action {
    /// The Azure resource provider operations it performs (`az provider operation show`),
    /// as `Microsoft.Authorization/permissions` reports them. Empty: no ARM call of its own
    /// (Kubernetes steps, HyperShift waits, Microsoft Graph and Key Vault's data plane).
    const ARM_ACTIONS: &'static [&'static str];
    /// The budget of the action's waits.
    const WAIT: WaitClass = WaitClass::ArmOperation;
    /// The budget of the undo's waits.
    const UNDO_WAIT: WaitClass = WaitClass::ArmOperation;

    /// What it changes, in a plan's words, beyond the resources its input names (which
    /// `plan` reads from every step alike).
    fn plan(input: &Self::Input) -> Vec<String> {
        let _ = input;
        Vec::new()
    }
}

/// One registered step's declarations, by its action name.
#[derive(Clone, Copy, Debug)]
pub struct StepFacts {
    /// The action name.
    pub name: &'static str,
    /// [`Facts::ARM_ACTIONS`].
    pub arm_actions: &'static [&'static str],
    /// [`Facts::WAIT`].
    pub wait: WaitClass,
    /// [`Facts::UNDO_WAIT`].
    pub undo_wait: WaitClass,
    plan: fn(&Value) -> Vec<String>,
}

impl StepFacts {
    /// The declarations of `T`.
    pub fn of<T: Facts>() -> Self {
        StepFacts {
            name: T::NAME,
            arm_actions: T::ARM_ACTIONS,
            wait: T::WAIT,
            undo_wait: T::UNDO_WAIT,
            plan: plan_of::<T>,
        }
    }

    /// [`Facts::plan`] of a journaled input (nothing when the input is not the step's, as
    /// a `$ref` to another step's output is until the run resolves it).
    pub fn plan(&self, input: &Value) -> Vec<String> {
        (self.plan)(input)
    }
}

fn plan_of<T: Facts>(input: &Value) -> Vec<String> {
    serde_json::from_value::<T::Input>(input.clone())
        .map(|i| T::plan(&i))
        .unwrap_or_default()
}
