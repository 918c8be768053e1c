//! OIDC issuer key and documents.
