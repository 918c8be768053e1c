//! TLS crypto provider installation.
