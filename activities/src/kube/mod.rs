//! Management cluster (kube-rs).
