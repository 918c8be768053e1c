//! The service-account issuer: its RSA signing key and the two public OIDC documents.
//!
//! A self-managed HyperShift cluster signs its service-account tokens with a key we
//! generate, and Azure's workload-identity federation trusts those tokens because it can
//! fetch the issuer's discovery document and JWKS from a public blob container
//! (DOMAIN.md §4 "OIDC"). Three places must agree on that key: the Secret the HostedCluster
//! names in `spec.serviceAccountSigningKey`, the JWKS blob, and the `kid` the API server
//! stamps into tokens. This module produces all three from one [`IssuerKey`].
//!
//! # Guarantees
//! - The private key only ever lives in a [`Secret`]: it is not serialized, and
//!   `Debug` of an [`IssuerKey`] shows the `kid`, never the key.
//! - [`IssuerKey::private_pem`] is a PKCS#1 `RSA PRIVATE KEY` PEM, the format HyperShift
//!   reads (`support/certs.PemToPrivateKey` calls `x509.ParsePKCS1PrivateKey`), under the
//!   Secret key [`crate::kube::render::SA_SIGNING_KEY_KEY`] (`key`).
//! - `kid` = base64url-nopad(SHA-256(DER of the PKIX SubjectPublicKeyInfo)), what the
//!   Kubernetes API server computes for the same key, so token headers match the JWKS.
//!
//! # Caveats
//! Keys are generated with aws-lc-rs (already in the tree for rustls). RSA-4096 generation
//! is CPU-bound (a fraction of a second to a few seconds, more in debug builds): call
//! [`IssuerKey::generate`] from `tokio::task::spawn_blocking` in async code. An existing key
//! is reused with [`IssuerKey::from_private_pem`]; a step must never regenerate a key that
//! a Secret already holds, or every token already minted stops validating.

use std::fmt;

use aws_lc_rs::digest;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize, PublicKeyComponents};
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hcp_runtime::StepError;
use hcp_runtime::error::kind;
use pem_rfc7468::LineEnding;
use pkcs8::ObjectIdentifier;
use serde_json::{Value, json};

use crate::secret::Secret;

/// Blob path of the discovery document, relative to the issuer URL.
pub const DISCOVERY_PATH: &str = ".well-known/openid-configuration";
/// Blob path of the JWKS, relative to the issuer URL.
pub const JWKS_PATH: &str = "openid/v1/jwks";

/// PEM label of a PKCS#1 RSA private key (what we write).
const PKCS1_LABEL: &str = "RSA PRIVATE KEY";
/// PEM label of a PKCS#8 private key (accepted on input).
const PKCS8_LABEL: &str = "PRIVATE KEY";
/// OID of `rsaEncryption` (RFC 8017 A.1), the only algorithm a PKCS#8 input may carry.
const RSA_ENCRYPTION_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// Why an issuer key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The crypto library failed to generate a key (no entropy, allocation failure).
    #[error("generating the RSA-4096 service-account issuer key failed")]
    Generate,
    /// The text is not PEM.
    #[error("the service-account signing key is not valid PEM: {0}")]
    Pem(String),
    /// The PEM holds something other than an RSA private key.
    #[error(
        "the service-account signing key PEM is labelled {0:?}; expected \"RSA PRIVATE KEY\" (PKCS#1) or \"PRIVATE KEY\" (PKCS#8 RSA)"
    )]
    UnsupportedLabel(String),
    /// The DER inside the PEM is not an acceptable RSA private key.
    #[error("the service-account signing key is not an acceptable RSA private key: {0}")]
    Rejected(String),
    /// Re-encoding the key failed (should not happen for a key that parsed).
    #[error("encoding the service-account signing key failed: {0}")]
    Encode(String),
}

impl From<OidcError> for StepError {
    fn from(e: OidcError) -> Self {
        // None of these clears by retrying: a bad key stays bad, and a generation failure
        // means the process is unhealthy, which a human should look at.
        StepError::permanent(kind::VALIDATION, e.to_string())
    }
}

/// The issuer's RSA key pair: the private key as a PKCS#1 PEM (secret) and the public key.
///
/// Construct it with [`generate`] / [`IssuerKey::generate`] or
/// [`IssuerKey::from_private_pem`] (the only constructors, so the parts always belong to
/// one key; do not modify the fields).
#[derive(Clone)]
pub struct IssuerKey {
    /// The private key, PKCS#1 PEM: the value of the `key` entry of the Secret named by
    /// the HostedCluster's `spec.serviceAccountSigningKey`.
    pub private_pem: Secret<String>,
    /// DER of the PKIX SubjectPublicKeyInfo.
    pub public_der: Vec<u8>,
    /// Modulus, big-endian, no leading zeros (for the JWKS).
    n: Vec<u8>,
    /// Public exponent, big-endian, no leading zeros.
    e: Vec<u8>,
}

impl fmt::Debug for IssuerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuerKey")
            .field("kid", &self.kid())
            .field("private_pem", &self.private_pem)
            .finish()
    }
}

impl IssuerKey {
    /// Generates a fresh RSA-4096 key (public exponent 65537).
    ///
    /// # Errors
    /// [`OidcError::Generate`] when the crypto library fails.
    pub fn generate() -> Result<IssuerKey, OidcError> {
        let pair = KeyPair::generate(KeySize::Rsa4096).map_err(|_| OidcError::Generate)?;
        let pkcs8 = pair
            .as_der()
            .map_err(|_| OidcError::Encode("PKCS#8 serialisation failed".into()))?;
        let pkcs1 = pkcs1_from_pkcs8(pkcs8.as_ref())?;
        let pem = pem_rfc7468::encode_string(PKCS1_LABEL, LineEnding::LF, &pkcs1)
            .map_err(|e| OidcError::Encode(e.to_string()))?;
        Self::from_pair(&pair, pem)
    }

    /// Reads an existing private key: PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8 (`PRIVATE KEY`)
    /// PEM. The result's `private_pem` is always PKCS#1 (a PKCS#1 input is
    /// kept byte for byte).
    ///
    /// # Errors
    /// [`OidcError::Pem`], [`OidcError::UnsupportedLabel`] or [`OidcError::Rejected`].
    pub fn from_private_pem(pem: &str) -> Result<IssuerKey, OidcError> {
        let trimmed = pem.trim();
        let (label, der) = pem_rfc7468::decode_vec(trimmed.as_bytes())
            .map_err(|e| OidcError::Pem(e.to_string()))?;
        match label {
            PKCS1_LABEL => {
                let pair =
                    KeyPair::from_der(&der).map_err(|e| OidcError::Rejected(e.to_string()))?;
                let mut kept = trimmed.to_string();
                kept.push('\n');
                Self::from_pair(&pair, kept)
            }
            PKCS8_LABEL => {
                let pkcs1 = pkcs1_from_pkcs8(&der)?;
                let pair =
                    KeyPair::from_pkcs8(&der).map_err(|e| OidcError::Rejected(e.to_string()))?;
                let pem = pem_rfc7468::encode_string(PKCS1_LABEL, LineEnding::LF, &pkcs1)
                    .map_err(|e| OidcError::Encode(e.to_string()))?;
                Self::from_pair(&pair, pem)
            }
            other => Err(OidcError::UnsupportedLabel(other.to_string())),
        }
    }

    fn from_pair(pair: &KeyPair, private_pem: String) -> Result<IssuerKey, OidcError> {
        let public = pair.public_key();
        let spki = public
            .as_der()
            .map_err(|_| OidcError::Encode("SubjectPublicKeyInfo serialisation failed".into()))?;
        let components = PublicKeyComponents::<Vec<u8>>::from(public);
        Ok(IssuerKey {
            private_pem: Secret::new(private_pem),
            public_der: spki.as_ref().to_vec(),
            n: components.n,
            e: components.e,
        })
    }

    /// The key id published in the JWKS (see [`kid`]).
    pub fn kid(&self) -> String {
        kid(&self.public_der)
    }
}

/// Generates a fresh RSA-4096 issuer key (see [`IssuerKey::generate`]).
///
/// # Errors
/// [`OidcError::Generate`] when the crypto library fails.
pub fn generate() -> Result<IssuerKey, OidcError> {
    IssuerKey::generate()
}

/// Extracts the PKCS#1 `RSAPrivateKey` from a PKCS#8 `PrivateKeyInfo`, refusing non-RSA keys.
fn pkcs1_from_pkcs8(der: &[u8]) -> Result<Vec<u8>, OidcError> {
    let info =
        pkcs8::PrivateKeyInfo::try_from(der).map_err(|e| OidcError::Rejected(e.to_string()))?;
    if info.algorithm.oid != RSA_ENCRYPTION_OID {
        return Err(OidcError::Rejected(format!(
            "PKCS#8 algorithm {} is not rsaEncryption",
            info.algorithm.oid
        )));
    }
    Ok(info.private_key.to_vec())
}

/// `kid` = base64url-nopad(SHA-256(`public_der`)), `public_der` being the DER of the PKIX
/// SubjectPublicKeyInfo — the Kubernetes API server's key id for the same key.
pub fn kid(public_der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, public_der).as_ref())
}

/// The discovery document served at `<issuer>/.well-known/openid-configuration`.
///
/// `issuer` is written exactly as given (it must match the HostedCluster's
/// `spec.issuerURL` and every federated credential byte for byte); `jwks_uri` is the
/// issuer without a trailing slash + `/openid/v1/jwks`.
pub fn discovery_document(issuer_url: &str) -> Value {
    json!({
        "issuer": issuer_url,
        "jwks_uri": format!("{}/{JWKS_PATH}", issuer_url.trim_end_matches('/')),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    })
}

/// The JWKS served at `<issuer>/openid/v1/jwks`: one RS256 signing key, `n` and `e` as
/// big-endian unsigned integers without leading zeros, base64url without padding.
pub fn jwks(key: &IssuerKey) -> Value {
    json!({
        "keys": [{
            "use": "sig",
            "kty": "RSA",
            "kid": key.kid(),
            "alg": "RS256",
            "n": URL_SAFE_NO_PAD.encode(&key.n),
            "e": URL_SAFE_NO_PAD.encode(&key.e),
        }]
    })
}
