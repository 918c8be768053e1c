//! Invalid cluster files: each `fixtures/bad/<case>.yaml` is paired with
//! `fixtures/bad/<case>.expected`, one `[rule] path: message` line per reported problem, in
//! order. The lines are the CLI's output, so this locks what a user reads.
//!
//! After changing messages on purpose: `UPDATE_EXPECTED=1 cargo test -p hcp-workflows --test
//! config_invalid`, then review the diff of the `.expected` files.
#![allow(clippy::unwrap_used)]

use hcp_workflows::config;
use std::path::{Path, PathBuf};

fn bad_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad")
}

fn render(errors: &config::ConfigErrors) -> String {
    let mut out = String::new();
    for e in errors.errors() {
        out.push_str(&format!("[{}] {e}\n", e.rule));
    }
    out
}

#[test]
fn every_bad_fixture_reports_exactly_its_expected_problems() {
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(bad_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "fixtures missing: {cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let expected_path = case.with_extension("expected");
        let actual = match config::load(case) {
            Ok(_) => "(accepted)\n".to_string(),
            Err(errors) => {
                // Display is the same lines without the rule tags.
                let plain: Vec<String> = errors.errors().iter().map(|e| e.to_string()).collect();
                assert_eq!(errors.to_string(), plain.join("\n"));
                assert!(!errors.is_retryable());
                render(&errors)
            }
        };
        if update {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{} has no .expected file", case.display()));
        if expected != actual {
            failures.push(format!(
                "== {}\n-- expected\n{expected}-- actual\n{actual}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Errors in the file's shape (the YAML parsed, a value has the wrong type or name) say where
/// in the file they are, besides the field path; semantic problems never claim a position.
#[test]
fn every_shape_error_names_its_line_and_column() {
    let shape = ["type", "unknown-field", "unknown-variant", "missing-field"];
    let mut seen = 0;
    for entry in std::fs::read_dir(bad_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let Err(errors) = config::load(&path) else {
            continue;
        };
        for e in errors.errors() {
            if shape.contains(&e.rule.as_str()) {
                seen += 1;
                let (Some(line), Some(column)) = (e.line, e.column) else {
                    panic!("{}: no position in {e:?}", path.display());
                };
                assert!(
                    e.to_string()
                        .contains(&format!("(line {line}, column {column}): ")),
                    "{}: {e}",
                    path.display()
                );
            } else if e.rule != "syntax" {
                assert_eq!((e.line, e.column), (None, None), "{}", path.display());
            }
        }
    }
    assert!(seen >= 10, "only {seen} shape errors among the fixtures");
}

#[test]
fn a_type_error_is_machine_readable_with_its_position() {
    let errors = config::load(&bad_dir().join("node-pools-not-a-list.yaml")).unwrap_err();
    assert_eq!(
        serde_json::to_value(&errors).unwrap(),
        serde_json::json!([{
            "path": "nodePools",
            "rule": "type",
            "message": "expected a list (`- item` lines, or `[]`), got the number 3",
            "line": 11,
            "column": 12
        }])
    );
}

#[test]
fn every_expected_file_has_a_fixture() {
    for entry in std::fs::read_dir(bad_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "expected") {
            assert!(
                path.with_extension("yaml").exists(),
                "orphan {}",
                path.display()
            );
        }
    }
}

#[test]
fn errors_serialize_for_machine_output() {
    let errors = config::load(&bad_dir().join("negative-replicas.yaml")).unwrap_err();
    let json = serde_json::to_value(&errors).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{
            "path": "nodePools[1].replicas",
            "rule": "min",
            "message": "must be ≥ 0 (got -1)"
        }])
    );
}
