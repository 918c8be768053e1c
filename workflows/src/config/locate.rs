//! Where a field path (`nodePools[0].replicas`) is written in the cluster file: line and
//! column, for errors found after the YAML parsed.
//!
//! Why a second pass: the file is deserialized through a generic value (see the module
//! caveat in `mod.rs`), which has no positions, so a type error only knows its field path.
//! This pass walks the same text with serde_norway's own deserializer, following the path
//! and skipping everything else, and fails on purpose at the node the path names;
//! serde_norway stamps that failure with the node's position (`Error::location`). No YAML
//! is parsed by hand, and aliases resolve the way the loader resolves them.
//!
//! When the path leads somewhere the text does not have (a key that only a `<<:` merge
//! brings in, a list shorter than the index), the deepest node reached is reported: the
//! map or list that should have held it.

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A map key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// Which node of the path's last step to point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The value (a wrong type, an unknown enum value, a missing key's map).
    Value,
    /// The key itself (an unknown key).
    Key,
}

/// 1-based line and column of the node `path` names in `yaml` (or of the deepest node on
/// the way to it); `None` only if serde_norway gives no position.
pub(crate) fn locate(yaml: &str, path: &[Step], target: Target) -> Option<(usize, usize)> {
    let de = serde_norway::Deserializer::from_str(yaml);
    match (Seek { path, target }).deserialize(de) {
        // Seek never succeeds: every branch ends in an error at some node.
        Ok(()) => None,
        Err(e) => e.location().map(|l| (l.line(), l.column())),
    }
}

/// The error that marks the node: serde_norway fills in where it was raised.
fn here<E: de::Error>() -> E {
    E::custom("located")
}

/// Follows `path` from the node being deserialized.
struct Seek<'p> {
    path: &'p [Step],
    target: Target,
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Step::Key(key), rest)) = self.path.split_first() else {
            // The path ends here, or wants an index of a map.
            return Err(here());
        };
        let at_key = rest.is_empty() && self.target == Target::Key;
        while let Some(found) = map.next_key_seed(KeyIs { key, fail: at_key })? {
            if found {
                return map.next_value_seed(Seek {
                    path: rest,
                    target: self.target,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        // Not written here (a default, or brought in by a merge): the map itself.
        Err(here())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Step::Index(index), rest)) = self.path.split_first() else {
            return Err(here());
        };
        for _ in 0..*index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(here());
            }
        }
        // Past the end (or an element that somehow did not fail): the list itself.
        seq.next_element_seed(Seek {
            path: rest,
            target: self.target,
        })?;
        Err(here())
    }

    // A scalar ends the walk, whatever is left of the path: this is the node.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(here())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(here())
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        Err(here())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(here())
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        Err(here())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(here())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(here())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(here())
    }
}

/// Deserializes one map key: `true` when it is `key` (or fails there when `fail`).
struct KeyIs<'k> {
    key: &'k str,
    fail: bool,
}

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match v == self.key {
            true if self.fail => Err(here()),
            matched => Ok(matched),
        }
    }

    // Keys that are not strings are never on a path (the loader refuses them).
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Step {
        Step::Key(k.to_string())
    }

    const DOC: &str = "\
# comment
name: demo
nodePools:
  - name: workers
    replicas: two
  - name: infra
    replicas: 3
network:
  create:
    vnetCidr: [1, 2]
flow: {a: 1, b: [x, y]}
";

    #[test]
    fn values_are_found_by_path() {
        let at = |path: &[Step]| locate(DOC, path, Target::Value);
        assert_eq!(at(&[key("name")]), Some((2, 7)));
        assert_eq!(at(&[key("nodePools")]), Some((4, 3)));
        assert_eq!(
            at(&[key("nodePools"), Step::Index(0), key("replicas")]),
            Some((5, 15))
        );
        assert_eq!(
            at(&[key("nodePools"), Step::Index(1), key("replicas")]),
            Some((7, 15))
        );
        assert_eq!(at(&[key("nodePools"), Step::Index(1)]), Some((6, 5)));
        assert_eq!(
            at(&[key("network"), key("create"), key("vnetCidr")]),
            Some((10, 15))
        );
        assert_eq!(at(&[key("flow"), key("b"), Step::Index(1)]), Some((11, 21)));
        // The whole document: its first node.
        assert_eq!(at(&[]), Some((2, 1)));
    }

    #[test]
    fn keys_are_found_when_asked_for() {
        assert_eq!(
            locate(
                DOC,
                &[key("nodePools"), Step::Index(1), key("replicas")],
                Target::Key
            ),
            Some((7, 5))
        );
        assert_eq!(locate(DOC, &[key("network")], Target::Key), Some((8, 1)));
    }

    #[test]
    fn a_path_the_text_lacks_stops_at_the_deepest_node() {
        let at = |path: &[Step]| locate(DOC, path, Target::Value);
        // No such key: the map that would hold it.
        assert_eq!(at(&[key("network"), key("existing")]), Some((9, 3)));
        // Index past the end: the list.
        assert_eq!(at(&[key("nodePools"), Step::Index(5)]), Some((4, 3)));
        // Deeper than a scalar: the scalar.
        assert_eq!(at(&[key("name"), key("x")]), Some((2, 7)));
        // An index of a map: the map.
        assert_eq!(at(&[key("network"), Step::Index(0)]), Some((9, 3)));
    }

    #[test]
    fn aliases_point_at_the_anchored_node() {
        let yaml = "base: &b\n  replicas: two\npool: *b\n";
        assert_eq!(
            locate(yaml, &[key("pool"), key("replicas")], Target::Value),
            Some((2, 13))
        );
    }

    #[test]
    fn an_empty_document_points_at_the_start() {
        assert_eq!(locate("", &[key("a")], Target::Value), Some((1, 1)));
    }
}
