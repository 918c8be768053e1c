//! Secrets that cannot be serialized or printed.
//!
//! Client secrets, pull secrets, storage account keys and private keys travel through the
//! activities; the journal, logs and command output must never see them. [`Secret`] makes
//! that a type error rather than a review item: it implements neither `Serialize` nor a
//! revealing `Debug`/`Display` (both print `[redacted]`), so a secret can only leave it
//! through an explicit, greppable [`Secret::expose`] call. It does implement
//! `Deserialize`, so a secret can be read straight out of a response (`listKeys`) without
//! passing through a plain `String` first.
//!
//! Zeroize-on-drop is deliberately not attempted: the values also live in the HTTP
//! client's buffers, where we cannot reach them.

use std::fmt;

/// A value that must never be logged, printed or serialized.
///
/// `Debug` and `Display` print `[redacted]`; there is no `Serialize`. Use
/// [`Secret::expose`] at the one place the value is really needed (a request body, a
/// signature).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a secret value.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret value. Every call site is a place where the secret leaves its wrapper:
    /// keep them few and never pass the result to a logger.
    pub fn expose(&self) -> &T {
        &self.0
    }

    /// Unwraps the value (for handing it to another secret type, such as
    /// `azure_core::credentials::Secret`).
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

/// Reading a secret from a document (e.g. `listKeys`) is fine; writing one is not, so
/// there is `Deserialize` but no `Serialize`.
impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Secret<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Secret)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("hunter2".to_string());
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
        assert_eq!(s.expose(), "hunter2");
        let b: Secret<Vec<u8>> = vec![1u8, 2].into();
        assert_eq!(format!("{b:#?}"), "[redacted]");
        assert_eq!(b.into_inner(), vec![1, 2]);
    }
}
