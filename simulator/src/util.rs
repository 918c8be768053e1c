//! Small helpers shared by the surfaces: deterministic ids, time formats, JSON walking,
//! IPv4 arithmetic, glob matching.

use std::net::Ipv4Addr;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::state::State;

/// A v4-shaped UUID derived from the seed and a persisted draw counter, so ids are
/// reproducible for a given `--seed` and request order, and never repeat after a reload.
pub(crate) fn uuid(st: &mut State, seed: u64) -> Uuid {
    st.rng_draws += 1;
    let ns = Uuid::from_u64_pair(seed, 0x6863_702d_7369_6d00);
    let bytes = *Uuid::new_v5(&ns, &st.rng_draws.to_le_bytes()).as_bytes();
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// RFC 3339 timestamp (`2024-01-02T03:04:05.123456789Z`) of simulator-clock ms.
pub(crate) fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_nanos(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// RFC 3339 with whole seconds, as Kubernetes writes timestamps.
pub(crate) fn rfc3339_secs(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// HTTP date (`Last-Modified`).
pub(crate) fn http_date(ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Whether any string inside `v` equals `needle` ignoring ASCII case (ARM ids are
/// case-insensitive). Used for "is this resource referenced" checks.
pub(crate) fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s.eq_ignore_ascii_case(needle),
        Value::Array(a) => a.iter().any(|x| mentions(x, needle)),
        Value::Object(o) => o.values().any(|x| mentions(x, needle)),
        _ => false,
    }
}

/// Whether any string inside `v` starts with `prefix` ignoring ASCII case.
pub(crate) fn mentions_prefix(v: &Value, prefix: &str) -> bool {
    match v {
        Value::String(s) => {
            s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
        }
        Value::Array(a) => a.iter().any(|x| mentions_prefix(x, prefix)),
        Value::Object(o) => o.values().any(|x| mentions_prefix(x, prefix)),
        _ => false,
    }
}

/// `v[key]` as an object, created if missing or not an object.
pub(crate) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let Value::Object(m) = v else {
        unreachable!("just made an object")
    };
    let slot = m
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(o) => o,
        _ => unreachable!("just made an object"),
    }
}

/// Sets `m[key] = value` unless the key is already present (a default).
pub(crate) fn default_field(m: &mut Map<String, Value>, key: &str, value: Value) {
    m.entry(key.to_string()).or_insert(value);
}

/// String at a JSON pointer.
pub(crate) fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// Parses `a.b.c.d/n`.
pub(crate) fn parse_cidr(s: &str) -> Option<(u32, u32)> {
    let (ip, len) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    (len <= 32).then_some((u32::from(ip), len))
}

/// The address `offset` hosts into `cidr`'s network.
pub(crate) fn ip_in(cidr: (u32, u32), offset: u32) -> String {
    let mask = if cidr.1 == 0 {
        0
    } else {
        u32::MAX << (32 - cidr.1)
    };
    Ipv4Addr::from((cidr.0 & mask).wrapping_add(offset)).to_string()
}

/// Glob match where `*` matches any run of characters (ASCII case-insensitive).
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0usize, 0usize, None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches() {
        assert!(glob(
            "*/privateLinkServices/*",
            "/subscriptions/x/providers/Microsoft.Network/privatelinkservices/p"
        ));
        assert!(glob("/a*c", "/abbbc"));
        assert!(!glob("/a*c", "/abbbd"));
        assert!(glob("*", ""));
    }

    #[test]
    fn cidr_offsets() {
        let c = parse_cidr("10.0.1.0/24").unwrap_or((0, 0));
        assert_eq!(ip_in(c, 4), "10.0.1.4");
    }
}
