//! Certificates: issuing Key Vault's self-signed ones (rcgen over aws-lc-rs), reading the
//! ones clients hand over (x509-parser), SHA-1 thumbprints (the `sha1` crate). No crypto is
//! written here.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, RsaKeySize, SanType,
};
use sha1::Digest;

/// SHA-1 of `bytes` (a certificate's DER: its thumbprint).
pub(crate) fn sha1(bytes: &[u8]) -> [u8; 20] {
    sha1::Sha1::digest(bytes).into()
}

/// Upper-case hex SHA-1 (the thumbprint as Azure displays it).
pub(crate) fn sha1_hex(bytes: &[u8]) -> String {
    sha1(bytes).iter().map(|b| format!("{b:02X}")).collect()
}

/// The DER of the first `CERTIFICATE` block of a PEM text, or `bytes` itself when it is not
/// PEM.
pub(crate) fn cert_der(bytes: &[u8]) -> Option<Vec<u8>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some(bytes.to_vec());
    };
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let Some(start) = text.find(BEGIN) else {
        // Not PEM text: DER that happens to be valid UTF-8 is not a certificate.
        return (!text.contains("-----BEGIN")).then(|| bytes.to_vec());
    };
    let body = &text[start + BEGIN.len()..];
    let end = body.find(END)?;
    let b64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD.decode(b64).ok()
}

/// Upper-case hex SHA-1 thumbprint of a certificate given as PEM (its first `CERTIFICATE`
/// block, e.g. of a Key Vault PEM secret holding `PRIVATE KEY` + `CERTIFICATE`) or DER.
/// `None` when it is not a parseable X.509 certificate. (For the simulated controllers that
/// check which certificate a client presents.)
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn cert_thumbprint(pem_or_der: &[u8]) -> Option<String> {
    let der = cert_der(pem_or_der)?;
    cert_info(&der)?;
    Some(sha1_hex(&der))
}

/// What the simulator reads from a certificate.
#[derive(Debug, Clone)]
pub(crate) struct CertInfo {
    /// RFC 4514-style subject (`CN=…`).
    pub subject: String,
    /// Validity, Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
}

/// Parses a DER X.509 certificate.
pub(crate) fn cert_info(der: &[u8]) -> Option<CertInfo> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let v = cert.validity();
    Some(CertInfo {
        subject: cert.subject().to_string(),
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

/// The parts of a certificate policy the issuer uses.
#[derive(Debug, Clone)]
pub(crate) struct IssueSpec {
    pub subject: String,
    pub dns_names: Vec<String>,
    pub emails: Vec<String>,
    pub validity_months: u32,
    pub key_size: u32,
    pub key_usage: Vec<String>,
    pub ekus: Vec<String>,
}

/// A freshly issued certificate and its key.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    pub cert_der: Vec<u8>,
    pub cert_pem: String,
    /// PKCS#8 `PRIVATE KEY` PEM.
    pub key_pem: String,
    /// The PKCS#10 request the pending operation reports (`csr`).
    pub csr_der: Vec<u8>,
    pub not_before: i64,
    pub not_after: i64,
}

/// Parses an X.500 subject such as `CN=a, O=b` (the attribute types Key Vault accepts in
/// `x509_props.subject`: CN, O, OU, L, ST/S, C, E).
pub(crate) fn parse_subject(s: &str) -> Result<DistinguishedName, String> {
    let mut dn = DistinguishedName::new();
    let mut any = false;
    for part in s.split([',', ';']) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!("Invalid subject name: {s}"));
        };
        let v = v.trim().trim_matches('"');
        let ty = match k.trim().to_ascii_uppercase().as_str() {
            "CN" => DnType::CommonName,
            "O" => DnType::OrganizationName,
            "OU" => DnType::OrganizationalUnitName,
            "L" => DnType::LocalityName,
            "ST" | "S" => DnType::StateOrProvinceName,
            "C" => DnType::CountryName,
            // emailAddress (PKCS#9).
            "E" => DnType::CustomDnType(vec![1, 2, 840, 113_549, 1, 9, 1]),
            _ => return Err(format!("Invalid subject name: {s}")),
        };
        if v.is_empty() {
            return Err(format!("Invalid subject name: {s}"));
        }
        dn.push(ty, v);
        any = true;
    }
    if any {
        Ok(dn)
    } else {
        Err(format!("Invalid subject name: {s}"))
    }
}

fn days_in_month(year: i32, month: u32) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Issues a self-signed certificate with a new RSA key (Key Vault's `Self` issuer).
pub(crate) fn issue_self_signed(spec: &IssueSpec, now_ms: u64) -> Result<Issued, String> {
    let size = match spec.key_size {
        2048 => RsaKeySize::_2048,
        3072 => RsaKeySize::_3072,
        4096 => RsaKeySize::_4096,
        other => return Err(format!("Invalid key size: {other}")),
    };
    let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, size)
        .map_err(|e| format!("key generation failed: {e}"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = parse_subject(&spec.subject)?;
    for d in &spec.dns_names {
        let name = d
            .clone()
            .try_into()
            .map_err(|_| format!("Invalid DNS name in subject alternative names: {d}"))?;
        params.subject_alt_names.push(SanType::DnsName(name));
    }
    for e in &spec.emails {
        let name = e
            .clone()
            .try_into()
            .map_err(|_| format!("Invalid email in subject alternative names: {e}"))?;
        params.subject_alt_names.push(SanType::Rfc822Name(name));
    }
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let nb_secs = (now_ms / 1000) as i64;
    let not_before = epoch + Duration::from_secs(nb_secs.max(0) as u64);
    // Calendar months, as `validity_months` means.
    let (y, m, d) = (
        not_before.year(),
        u32::from(u8::from(not_before.month())),
        not_before.day(),
    );
    let total = i64::from(y) * 12 + i64::from(m - 1) + i64::from(spec.validity_months);
    let (ny, nm) = ((total / 12) as i32, (total % 12) as u32 + 1);
    let nd = d.min(days_in_month(ny, nm));
    let time_of_day = Duration::from_secs((nb_secs.rem_euclid(86_400)) as u64);
    let not_after = rcgen::date_time_ymd(ny, nm as u8, nd) + time_of_day;
    params.not_before = not_before;
    params.not_after = not_after;
    params.is_ca = IsCa::ExplicitNoCa;
    for u in &spec.key_usage {
        let k = match u.as_str() {
            "digitalSignature" => KeyUsagePurpose::DigitalSignature,
            "nonRepudiation" => KeyUsagePurpose::ContentCommitment,
            "keyEncipherment" => KeyUsagePurpose::KeyEncipherment,
            "dataEncipherment" => KeyUsagePurpose::DataEncipherment,
            "keyAgreement" => KeyUsagePurpose::KeyAgreement,
            "keyCertSign" => KeyUsagePurpose::KeyCertSign,
            "cRLSign" => KeyUsagePurpose::CrlSign,
            "encipherOnly" => KeyUsagePurpose::EncipherOnly,
            "decipherOnly" => KeyUsagePurpose::DecipherOnly,
            other => return Err(format!("Invalid key usage: {other}")),
        };
        params.key_usages.push(k);
    }
    for e in &spec.ekus {
        let p = match e.as_str() {
            "1.3.6.1.5.5.7.3.1" => ExtendedKeyUsagePurpose::ServerAuth,
            "1.3.6.1.5.5.7.3.2" => ExtendedKeyUsagePurpose::ClientAuth,
            "1.3.6.1.5.5.7.3.3" => ExtendedKeyUsagePurpose::CodeSigning,
            "1.3.6.1.5.5.7.3.4" => ExtendedKeyUsagePurpose::EmailProtection,
            "1.3.6.1.5.5.7.3.8" => ExtendedKeyUsagePurpose::TimeStamping,
            "1.3.6.1.5.5.7.3.9" => ExtendedKeyUsagePurpose::OcspSigning,
            "2.5.29.37.0" => ExtendedKeyUsagePurpose::Any,
            other => {
                let arcs: Result<Vec<u64>, _> = other.split('.').map(str::parse).collect();
                match arcs {
                    Ok(a) if a.len() >= 2 => ExtendedKeyUsagePurpose::Other(a),
                    _ => return Err(format!("Invalid extended key usage: {other}")),
                }
            }
        };
        params.extended_key_usages.push(p);
    }
    let csr = params
        .serialize_request(&key)
        .map_err(|e| format!("certificate request failed: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("certificate signing failed: {e}"))?;
    Ok(Issued {
        cert_der: cert.der().to_vec(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        csr_der: csr.der().to_vec(),
        not_before: not_before.unix_timestamp(),
        not_after: not_after.unix_timestamp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_parse() {
        assert!(parse_subject("CN=hcp-cloud-provider").is_ok());
        assert!(parse_subject("CN=a, O=Red Hat, C=US").is_ok());
        assert!(parse_subject("nonsense").is_err());
        assert!(parse_subject("XX=a").is_err());
    }

    #[test]
    fn month_lengths() {
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2025, 4), 30);
    }
}
