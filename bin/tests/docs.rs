//! The book cannot drift from the binary or point nowhere:
//! - `docs/reference/cli.md` and `docs/reference/cluster-file.md` are what
//!   `hcp-workflow reference cli|cluster-file` prints (regenerate them with
//!   `HCP_BLESS=1 cargo test -p hcp-workflow --test docs`);
//! - every relative link in `docs/`, README.md, ARCHITECTURE.md and BENCHMARKS.md names a
//!   file that exists, and every `#anchor` a heading of that file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn generated(page: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hcp-workflow"))
        .args(["reference", page])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reference {page}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn check_page(page: &str, file: &str) {
    let path = root().join("docs/reference").join(file);
    let text = generated(page);
    if std::env::var_os("HCP_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != text {
        let first = committed
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(text.lines().count()));
        panic!(
            "docs/reference/{file} is stale (first difference at line {}: {:?}); regenerate it with `HCP_BLESS=1 cargo test -p hcp-workflow --test docs`",
            first + 1,
            text.lines().nth(first).unwrap_or("<end>")
        );
    }
}

#[test]
fn the_cli_reference_is_what_the_binary_says() {
    check_page("cli", "cli.md");
}

#[test]
fn the_cluster_file_reference_is_what_the_schema_says() {
    check_page("cluster-file", "cluster-file.md");
}

/// Every Markdown file the link check covers.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // The built book is not the source.
                if p.file_name().is_some_and(|n| n != "book") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let r = root();
    let mut out = vec![
        r.join("README.md"),
        r.join("ARCHITECTURE.md"),
        r.join("BENCHMARKS.md"),
    ];
    walk(&r.join("docs"), &mut out);
    out
}

/// The text outside fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for ch in line.chars() {
            if ch == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(ch);
            }
        }
        out.push('\n');
    }
    out
}

/// The link targets of `text`: `[..](target)` and `[label]: target`.
fn links(text: &str) -> Vec<String> {
    let p = prose(text);
    let mut out = Vec::new();
    let mut rest = p.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            let t = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(t.trim_matches(|c| c == '<' || c == '>').to_string());
            rest = &rest[end..];
        }
    }
    for line in p.lines() {
        let l = line.trim_start();
        if l.starts_with('[')
            && let Some((label, target)) = l.split_once("]: ")
            && !label.contains(']')
        {
            out.push(target.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    out
}

/// The anchors of a Markdown file's headings, as mdBook and GitHub make them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_lowercase().next().unwrap_or(c))
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for target in links(&text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with('/')
            {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let shown = file
                .strip_prefix(root())
                .unwrap_or(&file)
                .display()
                .to_string();
            if !dest.exists() {
                broken.push(format!("{shown}: {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && dest.extension().is_some_and(|x| x == "md") {
                let there = anchors(&std::fs::read_to_string(&dest).unwrap());
                if !there.contains(anchor) {
                    broken.push(format!("{shown}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    assert!(checked > 100, "the check found only {checked} links");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_reads_links_as_markdown_does() {
    let text =
        "See [a](x.md#one-two) and `[not](code.md)`.\n```\n[no](fence.md)\n```\n[ref]: y.md\n";
    assert_eq!(links(text), vec!["x.md#one-two", "y.md"]);
    let a = anchors("# One two\n## `hcp-workflow start`: its phases\n");
    assert!(
        a.contains("one-two") && a.contains("hcp-workflow-start-its-phases"),
        "{a:?}"
    );
}
