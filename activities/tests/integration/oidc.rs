//! The service-account issuer key and documents: kid, JWKS round trip, PEM reuse, redaction.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;
use std::time::Instant;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{PublicEncryptingKey, PublicKeyComponents};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hcp_activities::oidc::{self, IssuerKey, OidcError};
use sha2::{Digest, Sha256};

/// One generated key for the whole file: RSA-4096 generation is the slow part.
fn key() -> &'static IssuerKey {
    static KEY: OnceLock<IssuerKey> = OnceLock::new();
    KEY.get_or_init(|| {
        let t = Instant::now();
        let k = oidc::generate().unwrap();
        eprintln!("RSA-4096 generation took {:?}", t.elapsed());
        k
    })
}

#[test]
fn kid_is_sha256_of_the_spki_der() {
    let k = key();
    let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(&k.public_der));
    assert_eq!(k.kid(), expected);
    assert_eq!(oidc::kid(&k.public_der), expected);
    // 32 bytes → 43 base64url characters, no padding.
    assert_eq!(expected.len(), 43);
    assert!(!expected.contains('='));
    // The DER is an SPKI (SEQUENCE { AlgorithmIdentifier rsaEncryption, BIT STRING }), not a
    // bare PKCS#1 RSAPublicKey: it carries the rsaEncryption OID.
    let rsa_oid = [
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
    ];
    assert!(k.public_der.windows(rsa_oid.len()).any(|w| w == rsa_oid));
}

#[test]
fn jwks_n_and_e_round_trip_to_the_same_public_key() {
    let k = key();
    let jwks = oidc::jwks(k);
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    let jwk = &keys[0];
    assert_eq!(jwk["kty"], "RSA");
    assert_eq!(jwk["use"], "sig");
    assert_eq!(jwk["alg"], "RS256");
    assert_eq!(jwk["e"], "AQAB");
    assert_eq!(jwk["kid"], k.kid().as_str());
    let n = URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap();
    let e = URL_SAFE_NO_PAD.decode(jwk["e"].as_str().unwrap()).unwrap();
    // 4096-bit modulus, big-endian, no leading zero octet.
    assert_eq!(n.len(), 512);
    assert_ne!(n[0], 0);
    let rebuilt: PublicEncryptingKey = PublicKeyComponents { n, e }.try_into().unwrap();
    assert_eq!(rebuilt.as_der().unwrap().as_ref(), k.public_der.as_slice());
}

#[test]
fn from_private_pem_reuses_the_same_key() {
    let k = key();
    let pem = k.private_pem.expose();
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    assert!(pem.trim_end().ends_with("-----END RSA PRIVATE KEY-----"));
    let again = IssuerKey::from_private_pem(pem).unwrap();
    assert_eq!(again.kid(), k.kid());
    assert_eq!(again.public_der, k.public_der);
    assert_eq!(again.private_pem.expose(), pem);
    assert_eq!(oidc::jwks(&again), oidc::jwks(k));
}

#[test]
fn from_private_pem_accepts_pkcs8_and_normalises_to_pkcs1() {
    let k = key();
    let (_, pkcs1) = pem_decode(k.private_pem.expose());
    let pair = aws_lc_rs::rsa::KeyPair::from_der(&pkcs1).unwrap();
    let pkcs8 = pair.as_der().unwrap();
    let pkcs8_pem = pem_encode("PRIVATE KEY", pkcs8.as_ref());
    let from8 = IssuerKey::from_private_pem(&pkcs8_pem).unwrap();
    assert_eq!(from8.kid(), k.kid());
    assert!(
        from8
            .private_pem
            .expose()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----")
    );
    assert_eq!(pem_decode(from8.private_pem.expose()).1, pkcs1);
}

#[test]
fn bad_pem_is_refused_with_a_typed_error() {
    assert!(matches!(
        IssuerKey::from_private_pem("not a pem"),
        Err(OidcError::Pem(_))
    ));
    let cert = pem_encode("CERTIFICATE", &[0x30, 0x00]);
    assert!(matches!(
        IssuerKey::from_private_pem(&cert),
        Err(OidcError::UnsupportedLabel(l)) if l == "CERTIFICATE"
    ));
    let junk = pem_encode("RSA PRIVATE KEY", &[0x30, 0x03, 0x02, 0x01, 0x00]);
    let err = IssuerKey::from_private_pem(&junk).unwrap_err();
    assert!(matches!(err, OidcError::Rejected(_)));
    let step: hcp_runtime::StepError = err.into();
    assert!(!step.retryable);
}

#[test]
fn debug_never_shows_the_private_key() {
    let k = key();
    let dbg = format!("{k:?}");
    assert!(!dbg.contains("PRIVATE KEY"), "{dbg}");
    assert!(dbg.contains(&k.kid()));
    assert!(dbg.contains("[redacted]"));
    let pretty = format!("{k:#?}");
    assert!(!pretty.contains("PRIVATE KEY"));
}

#[test]
fn discovery_document_matches_domain() {
    let url = "https://acct.blob.core.windows.net/oidc";
    let doc = oidc::discovery_document(url);
    assert_eq!(
        doc,
        serde_json::json!({
            "issuer": url,
            "jwks_uri": "https://acct.blob.core.windows.net/oidc/openid/v1/jwks",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        })
    );
    // A trailing slash stays in the issuer (it must match byte for byte) but is not doubled.
    let doc = oidc::discovery_document("https://acct.blob.core.windows.net/oidc/");
    assert_eq!(doc["issuer"], "https://acct.blob.core.windows.net/oidc/");
    assert_eq!(
        doc["jwks_uri"],
        "https://acct.blob.core.windows.net/oidc/openid/v1/jwks"
    );
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn pem_decode(pem: &str) -> (String, Vec<u8>) {
    let mut lines = pem.lines();
    let label = lines
        .next()
        .unwrap()
        .trim_start_matches("-----BEGIN ")
        .trim_end_matches("-----")
        .to_string();
    let body: String = lines.take_while(|l| !l.starts_with("-----END")).collect();
    (
        label,
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap(),
    )
}
