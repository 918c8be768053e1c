//! Secrets that cannot be serialized or printed.
