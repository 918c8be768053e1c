//! create-cluster and delete-cluster saga definitions.
//!
//! **Not implemented yet** (tracked by issue 5): this crate exists so the workspace layout
//! is the final one.
