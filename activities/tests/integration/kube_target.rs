//! Building a management-cluster client from each kind of target, and the errors that say
//! which kubeconfig and context were tried and what to fix.
#![allow(clippy::unwrap_used)]

use hcp_activities::kube::{self, ErrorClass, Kind, KubeError, KubeTarget, Mgmt};
use hcp_simulator::{SimConfig, Simulator};

fn kubeconfig(server: &str, current: Option<&str>) -> String {
    let current = current
        .map(|c| format!("current-context: {c}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: {server}
users:
- name: nobody
  user: {{}}
contexts:
- name: alpha
  context:
    cluster: sim
    user: nobody
- name: beta
  context:
    cluster: sim
    user: nobody
{current}"
    )
}

async fn fails(target: &KubeTarget) -> KubeError {
    match kube::client(target).await {
        Ok(_) => panic!("{target} should not give a client"),
        Err(e) => e,
    }
}

async fn simulator() -> String {
    let mut cfg = SimConfig::default();
    cfg.throttle.enabled = false;
    let sim = Simulator::new(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.serve(listener));
    url
}

#[tokio::test]
async fn kubeconfig_with_a_context_reaches_the_cluster() {
    let url = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, kubeconfig(&url, Some("alpha"))).unwrap();
    for context in [None, Some("beta".to_string())] {
        let target = KubeTarget::Kubeconfig {
            path: Some(path.clone()),
            context,
        };
        let m = Mgmt::new(kube::client(&target).await.unwrap());
        m.apply_namespace("reached", &Default::default())
            .await
            .unwrap();
        assert!(
            m.labels(Kind::Namespace, "", "reached")
                .await
                .unwrap()
                .is_some()
        );
    }
}

#[tokio::test]
async fn kubeconfig_errors_name_the_file_the_context_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();

    let missing = dir.path().join("nope");
    let err = fails(&KubeTarget::Kubeconfig {
        path: Some(missing.clone()),
        context: None,
    })
    .await;
    let text = err.to_string();
    assert!(matches!(err, KubeError::Kubeconfig { .. }));
    assert!(text.contains(&missing.display().to_string()), "{text}");
    assert!(text.contains("cannot read it"), "{text}");
    assert_eq!(err.classify(), ErrorClass::Configuration);
    assert!(!err.is_retryable());

    let path = dir.path().join("config");
    std::fs::write(&path, kubeconfig("http://127.0.0.1:1", Some("alpha"))).unwrap();
    let err = fails(&KubeTarget::Kubeconfig {
        path: Some(path.clone()),
        context: Some("gamma".into()),
    })
    .await;
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("\"gamma\""), "{text}");
    assert!(text.contains("available contexts: alpha, beta"), "{text}");

    let no_current = dir.path().join("no-current");
    std::fs::write(&no_current, kubeconfig("http://127.0.0.1:1", None)).unwrap();
    let err = fails(&KubeTarget::Kubeconfig {
        path: Some(no_current),
        context: None,
    })
    .await;
    let text = err.to_string();
    assert!(text.contains("no current-context"), "{text}");
    assert!(text.contains("kubectl config use-context"), "{text}");

    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, "clusters: [[[").unwrap();
    let err = fails(&KubeTarget::Kubeconfig {
        path: Some(garbage.clone()),
        context: None,
    })
    .await;
    assert!(err.to_string().contains(&garbage.display().to_string()));

    let step: hcp_runtime::StepError = err.into();
    assert!(!step.retryable);
    assert_eq!(step.kind, "configuration");
}

#[tokio::test]
async fn endpoint_needs_a_scheme() {
    let err = fails(&KubeTarget::Endpoint {
        url: "127.0.0.1:8080".into(),
    })
    .await;
    assert!(matches!(err, KubeError::Endpoint { .. }));
    assert!(err.to_string().contains("http://"), "{err}");
}
