//! Azure and Kubernetes activities for hcp-workflow.
//!
//! **Not implemented yet** (tracked by issue 4): this crate exists so the workspace layout
//! is the final one. Nothing here is used by the engine.
