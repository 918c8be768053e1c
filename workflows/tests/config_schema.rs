//! `examples/cluster.schema.json` is generated from the config types and checked in, so
//! editors can validate cluster files. This test keeps it from drifting:
//! regenerate with `UPDATE_SCHEMA=1 cargo test -p hcp-workflows --test config_schema`.
#![allow(clippy::unwrap_used)]

use hcp_workflows::config;
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn yaml_as_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    let yaml: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&config::json_schema())
        .unwrap()
}

#[test]
fn config_schema_file_is_up_to_date() {
    let path = examples().join("cluster.schema.json");
    let generated = config::json_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        return;
    }
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        committed == generated,
        "examples/cluster.schema.json is stale; regenerate it with \
         `UPDATE_SCHEMA=1 cargo test -p hcp-workflows --test config_schema`"
    );
}

#[test]
fn config_schema_accepts_the_example() {
    for file in ["cluster.yaml", "aro-hcp.yaml"] {
        let example = yaml_as_json(&examples().join(file));
        let v = validator();
        let errors: Vec<String> = v.iter_errors(&example).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{file}: {errors:#?}");
    }
}

#[test]
fn config_schema_rejects_shape_errors_like_the_loader() {
    let v = validator();
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad");
    // Each of these is refused by serde; the schema must refuse it too, so an editor shows
    // the same problem before the CLI does.
    for case in [
        "unknown-key",
        "unknown-top-level-key",
        "unknown-variant",
        "type-error",
        "negative-replicas",
        "no-node-pools",
        "name-too-long",
        "storage-account-invalid",
        "bad-uuid",
    ] {
        let doc = yaml_as_json(&bad.join(format!("{case}.yaml")));
        assert!(!v.is_valid(&doc), "schema accepted {case}");
    }
}

#[test]
fn config_schema_documents_every_field() {
    let schema = config::json_schema();
    let props = schema["properties"].as_object().unwrap();
    for (key, prop) in props {
        assert!(
            prop.get("description")
                .is_some_and(|d| d.as_str().is_some_and(|s| !s.is_empty())),
            "{key} has no description"
        );
    }
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    for required in [
        "name",
        "subscription",
        "tenant",
        "topology",
        "nodePools",
        "pullSecret",
    ] {
        assert!(
            schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == required),
            "{required} not required"
        );
    }
    assert!(
        !schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "infraID"),
        "infraID must be optional"
    );
}
