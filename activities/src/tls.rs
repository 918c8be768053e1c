//! TLS crypto provider installation.
//!
//! rustls 0.23 picks its process-wide crypto provider automatically only when exactly one
//! provider feature is compiled in. kube-rs (`aws-lc-rs`), reqwest and azure_core each pull
//! rustls with their own feature sets, and as soon as the dependency graph enables a second
//! provider anywhere, the first TLS handshake panics with "Could not automatically
//! determine the process-level CryptoProvider". Installing aws-lc-rs explicitly, once,
//! before any client is built removes that dependence on the graph.

/// Installs rustls' aws-lc-rs provider as the process default.
///
/// Idempotent and cheap: later calls (and a provider installed by someone else first)
/// are fine; whichever provider was installed first stays.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err means another thread installed one in between: that is equally fine.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn install_twice_is_harmless() {
        super::install_crypto_provider();
        super::install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
