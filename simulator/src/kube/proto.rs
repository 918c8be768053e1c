//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded to
//! JSON for the kinds kubectl's typed clients send that way (`kubectl create namespace /
//! configmap / secret / service`, and `DeleteOptions`).
//!
//! kubectl (client-go) sends built-in kinds as protobuf and does not fall back to JSON on a
//! 415: client-go's fallback (`requestClientContentConfigProvider.UnsupportedMediaType` in
//! k8s.io/client-go/rest) only remembers a 415 to a CBOR request, so a server has to read
//! protobuf. Only the
//! fields those commands set are decoded: ObjectMeta (name, generateName, namespace,
//! labels, annotations, finalizers), ConfigMap, Secret, Namespace, the common ServiceSpec
//! fields. Field numbers are those of k8s.io/api/core/v1/generated.proto and
//! k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto. Other kinds keep answering 415.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// The envelope's magic prefix (`runtime/serializer/protobuf`).
const MAGIC: &[u8] = b"k8s\x00";

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, in order.
fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < b.len() {
        let key = varint(b, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(b, &mut pos)?))),
            1 => pos = pos.checked_add(8)?,
            2 => {
                let len = usize::try_from(varint(b, &mut pos)?).ok()?;
                let end = pos.checked_add(len)?;
                out.push((num, Field::Bytes(b.get(pos..end)?)));
                pos = end;
            }
            5 => pos = pos.checked_add(4)?,
            _ => return None,
        }
    }
    (pos == b.len()).then_some(out)
}

fn string(f: &Field) -> Option<String> {
    match f {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).ok(),
        Field::Varint(_) => None,
    }
}

/// A `map<string, V>` entry (key 1, value 2).
fn map_entry<'a>(f: &Field<'a>) -> Option<(String, Option<&'a [u8]>)> {
    let Field::Bytes(b) = f else { return None };
    let mut k = None;
    let mut v = None;
    for (n, x) in fields(b)? {
        match (n, x) {
            (1, x) => k = string(&x),
            (2, Field::Bytes(b)) => v = Some(b),
            _ => {}
        }
    }
    Some((k?, v))
}

fn str_map(entries: &[&Field], bytes_as_base64: bool) -> Option<Value> {
    let mut m = Map::new();
    for f in entries {
        let (k, v) = map_entry(f)?;
        let v = v.unwrap_or_default();
        let v = if bytes_as_base64 {
            json!(STANDARD.encode(v))
        } else {
            json!(String::from_utf8(v.to_vec()).ok()?)
        };
        m.insert(k, v);
    }
    Some(Value::Object(m))
}

fn all<'a, 'b>(fs: &'b [(u64, Field<'a>)], n: u64) -> Vec<&'b Field<'a>> {
    fs.iter().filter(|(k, _)| *k == n).map(|(_, f)| f).collect()
}

fn first<'a, 'b>(fs: &'b [(u64, Field<'a>)], n: u64) -> Option<&'b Field<'a>> {
    fs.iter().find(|(k, _)| *k == n).map(|(_, f)| f)
}

fn sub<'a>(f: Option<&Field<'a>>) -> Option<Vec<(u64, Field<'a>)>> {
    match f {
        Some(Field::Bytes(b)) => fields(b),
        _ => Some(Vec::new()),
    }
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let fs = fields(b)?;
    let mut m = Map::new();
    for (n, key) in [
        (1, "name"),
        (2, "generateName"),
        (3, "namespace"),
        (6, "resourceVersion"),
    ] {
        if let Some(s) = first(&fs, n).and_then(string).filter(|s| !s.is_empty()) {
            m.insert(key.into(), json!(s));
        }
    }
    let labels = all(&fs, 11);
    if !labels.is_empty() {
        m.insert("labels".into(), str_map(&labels, false)?);
    }
    let annotations = all(&fs, 12);
    if !annotations.is_empty() {
        m.insert("annotations".into(), str_map(&annotations, false)?);
    }
    let fins: Vec<String> = all(&fs, 14).into_iter().filter_map(string).collect();
    if !fins.is_empty() {
        m.insert("finalizers".into(), json!(fins));
    }
    Some(Value::Object(m))
}

fn metadata_of(fs: &[(u64, Field)]) -> Option<Value> {
    match first(fs, 1) {
        Some(Field::Bytes(b)) => object_meta(b),
        _ => Some(json!({})),
    }
}

fn service_spec(fs: &[(u64, Field)]) -> Option<Value> {
    let mut spec = Map::new();
    let mut ports = Vec::new();
    for p in all(fs, 1) {
        let Field::Bytes(b) = p else { continue };
        let pf = fields(b)?;
        let mut port = Map::new();
        if let Some(s) = first(&pf, 1).and_then(string).filter(|s| !s.is_empty()) {
            port.insert("name".into(), json!(s));
        }
        if let Some(s) = first(&pf, 2).and_then(string) {
            port.insert("protocol".into(), json!(s));
        }
        if let Some(Field::Varint(v)) = first(&pf, 3) {
            port.insert("port".into(), json!(v));
        }
        if let Some(Field::Bytes(t)) = first(&pf, 4) {
            let tf = fields(t)?;
            match (first(&tf, 1), first(&tf, 2), first(&tf, 3).and_then(string)) {
                (Some(Field::Varint(1)), _, Some(s)) => port.insert("targetPort".into(), json!(s)),
                (_, Some(Field::Varint(i)), _) => port.insert("targetPort".into(), json!(i)),
                _ => None,
            };
        }
        if let Some(Field::Varint(v)) = first(&pf, 5) {
            port.insert("nodePort".into(), json!(v));
        }
        ports.push(Value::Object(port));
    }
    if !ports.is_empty() {
        spec.insert("ports".into(), Value::Array(ports));
    }
    let selector = all(fs, 2);
    if !selector.is_empty() {
        spec.insert("selector".into(), str_map(&selector, false)?);
    }
    if let Some(s) = first(fs, 3).and_then(string).filter(|s| !s.is_empty()) {
        spec.insert("clusterIP".into(), json!(s));
    }
    if let Some(s) = first(fs, 4).and_then(string).filter(|s| !s.is_empty()) {
        spec.insert("type".into(), json!(s));
    }
    if let Some(s) = first(fs, 10).and_then(string).filter(|s| !s.is_empty()) {
        spec.insert("externalName".into(), json!(s));
    }
    Some(Value::Object(spec))
}

/// Decodes a protobuf body to its JSON form; `None` when it is not one this simulator
/// reads (malformed, or a kind not listed above).
pub(crate) fn decode(body: &[u8]) -> Option<Value> {
    let env = fields(body.strip_prefix(MAGIC)?)?;
    let tm = sub(first(&env, 1))?;
    let api_version = first(&tm, 1).and_then(string).unwrap_or_default();
    let kind = first(&tm, 2).and_then(string).unwrap_or_default();
    let Some(Field::Bytes(raw)) = first(&env, 2) else {
        return None;
    };
    let fs = fields(raw)?;
    let mut obj = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            let mut o = json!({"metadata": metadata_of(&fs)?});
            let spec = sub(first(&fs, 2))?;
            let fins: Vec<String> = all(&spec, 1).into_iter().filter_map(string).collect();
            if !fins.is_empty() {
                o["spec"] = json!({"finalizers": fins});
            }
            o
        }
        ("v1", "ConfigMap") => {
            let mut o = json!({"metadata": metadata_of(&fs)?});
            let data = all(&fs, 2);
            if !data.is_empty() {
                o["data"] = str_map(&data, false)?;
            }
            let bin = all(&fs, 3);
            if !bin.is_empty() {
                o["binaryData"] = str_map(&bin, true)?;
            }
            if let Some(Field::Varint(v)) = first(&fs, 4) {
                o["immutable"] = json!(*v != 0);
            }
            o
        }
        ("v1", "Secret") => {
            let mut o = json!({"metadata": metadata_of(&fs)?});
            let data = all(&fs, 2);
            if !data.is_empty() {
                o["data"] = str_map(&data, true)?;
            }
            if let Some(t) = first(&fs, 3).and_then(string).filter(|s| !s.is_empty()) {
                o["type"] = json!(t);
            }
            let sd = all(&fs, 4);
            if !sd.is_empty() {
                o["stringData"] = str_map(&sd, false)?;
            }
            if let Some(Field::Varint(v)) = first(&fs, 5) {
                o["immutable"] = json!(*v != 0);
            }
            o
        }
        ("v1", "Service") => {
            let spec = sub(first(&fs, 2))?;
            json!({"metadata": metadata_of(&fs)?, "spec": service_spec(&spec)?})
        }
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => {
            let mut o = json!({});
            if let Some(Field::Varint(g)) = first(&fs, 1) {
                o["gracePeriodSeconds"] = json!(g);
            }
            if let Some(Field::Bytes(p)) = first(&fs, 2) {
                let pf = fields(p)?;
                if let Some(uid) = first(&pf, 1).and_then(string) {
                    o["preconditions"]["uid"] = json!(uid);
                }
                if let Some(rv) = first(&pf, 2).and_then(string) {
                    o["preconditions"]["resourceVersion"] = json!(rv);
                }
            }
            if let Some(p) = first(&fs, 4).and_then(string) {
                o["propagationPolicy"] = json!(p);
            }
            let dry: Vec<String> = all(&fs, 5).into_iter().filter_map(string).collect();
            if !dry.is_empty() {
                o["dryRun"] = json!(dry);
            }
            return Some(o);
        }
        _ => return None,
    };
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Some(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(num: u64, b: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, b.len() as u8];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = [ld(1, b"c1"), ld(3, b"ns")].concat();
        let entry = [ld(1, b"a"), ld(2, b"b")].concat();
        let cm = [ld(1, &meta), ld(2, &entry)].concat();
        let tm = [ld(1, b"v1"), ld(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &cm)].concat();
        assert_eq!(
            decode(&body),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c1", "namespace": "ns"}, "data": {"a": "b"}}))
        );
    }
}
