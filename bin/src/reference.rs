//! `hcp-workflow reference cli|cluster-file` (hidden): the book's two generated reference
//! pages, written from clap's own definitions and from the cluster file's JSON Schema, so
//! the pages cannot say anything the binary does not do. `bin/tests/docs.rs` fails when the
//! checked-in pages differ from what this prints.

use serde_json::{Map, Value};
use std::fmt::Write as _;

/// Which page.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Page {
    /// `docs/reference/cli.md`: every command, its options, defaults and environment.
    Cli,
    /// `docs/reference/cluster-file.md`: every field of a cluster file.
    ClusterFile,
}

/// The page's text, ready to be written to `docs/reference/`.
pub fn page(page: Page, cli: &clap::Command) -> String {
    match page {
        Page::Cli => {
            // Built, so each option knows how many values it takes.
            let mut cli = cli.clone();
            cli.build();
            cli_page(&cli)
        }
        Page::ClusterFile => cluster_file_page(&hcp_workflows::config::json_schema()),
    }
}

/// The first line of a generated page: what regenerates it.
fn marker(what: &str) -> String {
    format!(
        "<!-- generated: hcp-workflow reference {what}; regenerate with `HCP_BLESS=1 cargo test -p hcp-workflow --test docs` -->\n"
    )
}

/// One line of a Markdown table cell: pipes escaped, line breaks folded.
fn cell(s: &str) -> String {
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn cli_page(root: &clap::Command) -> String {
    let mut out = marker("cli");
    out.push_str("# Command line\n\n");
    out.push_str(
        "Every command and option of `hcp-workflow`, as its `--help` gives them. Options listed under\n\
         the first section are global: they go before or after any command.\n",
    );
    command_section(&mut out, root, "hcp-workflow");
    out
}

fn command_section(out: &mut String, cmd: &clap::Command, path: &str) {
    let _ = write!(out, "\n## `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim());
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| {
            !a.is_hide_set()
                && !matches!(a.get_id().as_str(), "help" | "version")
                && (path == "hcp-workflow" || !a.is_global_set())
        })
        .collect();
    if !args.is_empty() {
        out.push_str(
            "| Argument | Value | Default | Environment | Meaning |\n|---|---|---|---|---|\n",
        );
        for a in args {
            arg_row(out, a);
        }
        out.push('\n');
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = writeln!(out, "```text\n{}\n```", after.to_string().trim_end());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        command_section(out, sub, &format!("{path} {}", sub.get_name()));
    }
}

fn arg_row(out: &mut String, a: &clap::Arg) {
    let name = match (a.get_long(), a.get_short()) {
        (Some(l), Some(s)) => format!("`--{l}`, `-{s}`"),
        (Some(l), None) => format!("`--{l}`"),
        (None, Some(s)) => format!("`-{s}`"),
        (None, None) => {
            let v = a
                .get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| a.get_id().as_str().to_uppercase(), ToString::to_string);
            format!("`<{v}>`")
        }
    };
    let takes_value = a.get_action().takes_values();
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| format!("`{}`", p.get_name()))
        .collect();
    let value = if !takes_value {
        String::new()
    } else if !possible.is_empty() {
        possible.join(", ")
    } else if !a.is_positional() {
        a.get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| format!("`{}`", a.get_id().as_str().to_uppercase()))
    } else {
        String::new()
    };
    let defaults = if takes_value {
        a.get_default_values()
    } else {
        &[]
    };
    let default = defaults
        .iter()
        .map(|d| format!("`{}`", d.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(", ");
    let env = a
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default();
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "| {name} | {} | {} | {env} | {} |",
        cell(&value),
        cell(&default),
        cell(&help)
    );
}

fn cluster_file_page(schema: &Value) -> String {
    let mut out = marker("cluster-file");
    out.push_str("# Cluster file\n\n");
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        let _ = writeln!(out, "{}\n", d.trim());
    }
    out.push_str(
        "Every field of a cluster file, from its JSON Schema (`examples/cluster.schema.json`, which\n\
         editors complete from). `examples/cluster.yaml` shows them in use. A field marked\n\
         *required* must be given; `a[]` is an element of the list `a`; `a.<key>` a value of the\n\
         map `a`. Where a field takes one of several shapes, each shape's fields follow it.\n\n\
         | Field | Type | Default | Meaning |\n|---|---|---|---|\n",
    );
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    fields(&mut out, &defs, schema, "", 0);
    out
}

/// The definition a `$ref` names, else the schema itself.
fn resolve<'a>(defs: &'a Map<String, Value>, s: &'a Value) -> &'a Value {
    s.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|n| defs.get(n))
        .unwrap_or(s)
}

/// The rows of `object`'s properties, under `prefix`, then of their own fields.
fn fields(out: &mut String, defs: &Map<String, Value>, object: &Value, prefix: &str, depth: usize) {
    // The types nest a few levels; a deeper walk would be a recursive type.
    if depth > 8 {
        return;
    }
    let object = resolve(defs, object);
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = object.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            field(
                out,
                defs,
                &path,
                prop,
                required.contains(&name.as_str()),
                depth,
            );
        }
    }
    // A union of object shapes (`identities: create | existing | aroHcp`): each shape's fields.
    for key in ["oneOf", "anyOf"] {
        for variant in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let v = resolve(defs, variant);
            if v.get("properties").is_some() {
                fields(out, defs, v, prefix, depth + 1);
            }
        }
    }
}

fn field(
    out: &mut String,
    defs: &Map<String, Value>,
    path: &str,
    prop: &Value,
    required: bool,
    depth: usize,
) {
    let target = resolve(defs, nullable(prop));
    let description = prop
        .get("description")
        .or_else(|| target.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let default = prop
        .get("default")
        .or_else(|| target.get("default"))
        .map(|d| format!("`{d}`"))
        .unwrap_or_default();
    let mut ty = type_of(defs, prop);
    if required {
        ty.push_str(", *required*");
    }
    let _ = writeln!(
        out,
        "| `{path}` | {ty} | {default} | {} |",
        cell(description)
    );
    // Lists and maps of objects, and objects: their fields follow.
    if let Some(items) = target.get("items") {
        let item = resolve(defs, items);
        if item.get("properties").is_some() || item.get("oneOf").is_some() {
            fields(out, defs, item, &format!("{path}[]"), depth + 1);
        }
    } else if let Some(values) = target.get("additionalProperties").filter(|v| v.is_object()) {
        let value = resolve(defs, values);
        if value.get("properties").is_some() {
            fields(out, defs, value, &format!("{path}.<key>"), depth + 1);
        }
    } else if target.get("properties").is_some() || target.get("oneOf").is_some() {
        fields(out, defs, target, path, depth + 1);
    }
}

/// `T | null` (an optional field) as `T`.
fn nullable(prop: &Value) -> &Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(vs) = prop.get(key).and_then(Value::as_array) {
            let not_null: Vec<&Value> = vs
                .iter()
                .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if not_null.len() == 1 && vs.len() == 2 {
                return not_null[0];
            }
        }
    }
    prop
}

/// A field's type in words: `string`, `list of string`, `one of `a`, `b``, an object's name.
fn type_of(defs: &Map<String, Value>, prop: &Value) -> String {
    let prop = nullable(prop);
    let name = prop
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"));
    let s = resolve(defs, prop);
    if let Some(values) = enum_values(defs, s) {
        return format!("one of {values}");
    }
    let t = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => String::new(),
    };
    match t.as_str() {
        "array" => {
            let item = s.get("items").map(|i| type_of(defs, i)).unwrap_or_default();
            format!("list of {item}")
        }
        "object" if s.get("properties").is_none() => match s.get("additionalProperties") {
            Some(v) if v.is_object() => format!("map of {}", type_of(defs, v)),
            _ => "object".into(),
        },
        "" | "object" => name.map_or_else(|| "object".into(), |n| format!("object ({n})")),
        _ => {
            let mut t = t;
            if let Some(f) = s.get("format").and_then(Value::as_str) {
                let _ = write!(t, " ({f})");
            }
            t
        }
    }
}

/// `` `a`, `b` `` for a string enum (`enum`, or a union of `const`s).
fn enum_values(defs: &Map<String, Value>, s: &Value) -> Option<String> {
    let quote = |v: &Value| match v {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    };
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return Some(e.iter().map(quote).collect::<Vec<_>>().join(", "));
    }
    let vs = s.get("oneOf").or_else(|| s.get("anyOf"))?.as_array()?;
    let mut out = Vec::new();
    for v in vs {
        let v = resolve(defs, v);
        if let Some(c) = v.get("const") {
            out.push(quote(c));
        } else if let Some(e) = v.get("enum").and_then(Value::as_array) {
            out.extend(e.iter().map(quote));
        } else {
            return None;
        }
    }
    Some(out.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_becomes_one_row_per_field_with_nested_lists_and_unions() {
        let schema = json!({
            "description": "A cluster.",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "description": "Its name."},
                "pools": {"type": "array", "items": {"$ref": "#/$defs/Pool"}},
                "mode": {"$ref": "#/$defs/Mode", "default": "a"},
            },
            "$defs": {
                "Pool": {"type": "object", "properties": {"size": {"type": ["integer", "null"], "description": "How many.\nAt least 1 | 2."}}},
                "Mode": {"oneOf": [{"const": "a"}, {"const": "b"}]},
            }
        });
        let page = cluster_file_page(&schema);
        assert!(
            page.contains("| `name` | string, *required* |  | Its name. |"),
            "{page}"
        );
        assert!(
            page.contains("| `pools` | list of object (Pool) |"),
            "{page}"
        );
        assert!(
            page.contains("| `pools[].size` | integer |  | How many. At least 1 \\| 2. |"),
            "{page}"
        );
        assert!(
            page.contains("| `mode` | one of `a`, `b` | `\"a\"` |"),
            "{page}"
        );
    }
}
