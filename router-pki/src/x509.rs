//! What an operator (and router-pki itself) needs to know about an X.509
//! certificate: subject, issuer, validity, dNSName SANs, whether it is a
//! CA, and its public key. Read with the bounded [`der`](crate::der)
//! reader; signatures are not checked here (that is webpki's job in
//! [`crate::tls`]).

use std::fmt;

use crate::der::{self, DerError, Reader, Tlv};
use crate::identity::Fingerprint;

/// Certificates larger than this are refused (ours are ~400 bytes).
pub const MAX_CERT_DER: usize = 16 * 1024;

const OID_ED25519: &[u64] = &[1, 3, 101, 112];
const OID_SAN: &[u64] = &[2, 5, 29, 17];
const OID_BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];
/// GeneralName `[2] IMPLICIT IA5String` (dNSName).
const SAN_DNS: u8 = 0x82;
const SAN_URI: u8 = 0x86;
/// Caps on what one certificate may list, so output stays bounded.
const MAX_NAMES: usize = 64;
const MAX_ATTRS: usize = 32;

/// The certificate's subject key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    Ed25519([u8; 32]),
    /// Any other algorithm, by dotted OID.
    Other(String),
}

impl PublicKey {
    /// The `sha256:` fingerprint (Ed25519 keys only).
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        match self {
            PublicKey::Ed25519(k) => Some(Fingerprint::of_raw(k)),
            PublicKey::Other(_) => None,
        }
    }
}

/// One attribute of a distinguished name, with its DER string type kept
/// so a name can be written again byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAttr {
    pub oid: Vec<u64>,
    /// The DER string tag (0x0c UTF8String, 0x13 PrintableString, ...).
    pub tag: u8,
    pub value: Vec<u8>,
}

/// A distinguished name: its attributes in order, and whether any RDN
/// held more than one (rare; such a name cannot be re-encoded as one
/// attribute per RDN).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Name {
    pub attrs: Vec<NameAttr>,
    pub multi_valued: bool,
}

impl Name {
    /// The first CN, if any.
    pub fn common_name(&self) -> Option<String> {
        self.attrs
            .iter()
            .find(|a| a.oid == [2, 5, 4, 3])
            .map(|a| string_value(a.tag, &a.value))
    }
}

impl fmt::Display for Name {
    /// `CN=router-b, O=Example` (RFC 4514 order is reversed; this is the
    /// order openssl's `-nameopt oneline` and most tools show).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.attrs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let key = match a.oid.as_slice() {
                [2, 5, 4, 3] => "CN".to_string(),
                [2, 5, 4, 5] => "serialNumber".to_string(),
                [2, 5, 4, 6] => "C".to_string(),
                [2, 5, 4, 7] => "L".to_string(),
                [2, 5, 4, 8] => "ST".to_string(),
                [2, 5, 4, 10] => "O".to_string(),
                [2, 5, 4, 11] => "OU".to_string(),
                [0, 9, 2342, 19200300, 100, 1, 25] => "DC".to_string(),
                other => der::oid_text(other),
            };
            write!(f, "{key}={}", string_value(a.tag, &a.value))?;
        }
        Ok(())
    }
}

/// A DER string as text; control characters (and what does not decode)
/// shown as `\xNN` so a hostile name cannot drive the terminal.
fn string_value(tag: u8, value: &[u8]) -> String {
    let decoded: Option<String> = match tag {
        // UTF8String, PrintableString, IA5String, VisibleString
        0x0c | 0x13 | 0x16 | 0x1a => std::str::from_utf8(value).ok().map(str::to_string),
        // TeletexString: treated as Latin-1, as most tools do.
        0x14 => Some(value.iter().map(|&b| char::from(b)).collect()),
        // BMPString (UCS-2)
        0x1e if value.len().is_multiple_of(2) => {
            char::decode_utf16(value.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])))
                .collect::<Result<String, _>>()
                .ok()
        }
        // UniversalString (UCS-4)
        0x1c if value.len().is_multiple_of(4) => value
            .chunks(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    };
    match decoded {
        Some(s) => s
            .chars()
            .map(|c| {
                if c.is_control() {
                    format!("\\x{:02x}", u32::from(c))
                } else {
                    c.to_string()
                }
            })
            .collect(),
        None => value.iter().map(|b| format!("\\x{b:02x}")).collect(),
    }
}

/// The fields of a certificate that we show and check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub subject: Name,
    /// The subject's DER, whole: a certificate this one issues names it
    /// as issuer byte for byte (name matching compares the bytes).
    pub subject_der: Vec<u8>,
    pub issuer: Name,
    /// Validity, Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
    /// subjectAltName dNSName entries (others are skipped).
    pub dns_names: Vec<String>,
    /// subjectAltName uniformResourceIdentifier entries (a caller's
    /// `agent://tenant/name` on the public listeners).
    pub uris: Vec<String>,
    /// basicConstraints cA.
    pub is_ca: bool,
    pub key: PublicKey,
    pub serial: Vec<u8>,
}

impl Summary {
    /// Whether the certificate names itself as its issuer.
    pub fn self_issued(&self) -> bool {
        self.subject == self.issuer
    }
}

/// Why a certificate could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertReadError {
    TooLarge(usize),
    Der(DerError),
    /// A structure we do not accept (version, extension content, ...).
    Unsupported(&'static str),
}

impl fmt::Display for CertReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertReadError::TooLarge(n) => {
                write!(f, "certificate is {n} bytes, more than {MAX_CERT_DER}")
            }
            CertReadError::Der(e) => write!(f, "certificate is not valid DER: {e}"),
            CertReadError::Unsupported(what) => write!(f, "certificate: unsupported {what}"),
        }
    }
}

impl std::error::Error for CertReadError {}

impl From<DerError> for CertReadError {
    fn from(e: DerError) -> Self {
        CertReadError::Der(e)
    }
}

/// Reads a DER certificate.
pub fn read(cert: &[u8]) -> Result<Summary, CertReadError> {
    if cert.len() > MAX_CERT_DER {
        return Err(CertReadError::TooLarge(cert.len()));
    }
    let mut outer = Reader::new(cert);
    let body = outer.expect(der::SEQUENCE)?;
    outer.finish()?;
    let mut cert_seq = Reader::new(body);
    let tbs = cert_seq.expect(der::SEQUENCE)?;
    cert_seq.expect(der::SEQUENCE)?; // signatureAlgorithm
    cert_seq.expect(der::BIT_STRING)?;
    cert_seq.finish()?;

    let mut t = Reader::new(tbs);
    if let Some(v) = t.optional(0xa0)? {
        let mut v = Reader::new(v);
        if v.expect(der::INTEGER)? != [2] {
            return Err(CertReadError::Unsupported("version (only v3)"));
        }
        v.finish()?;
    }
    let serial = t.expect(der::INTEGER)?.to_vec();
    t.expect(der::SEQUENCE)?; // signature
    let issuer = name(t.expect(der::SEQUENCE)?)?;
    let mut validity = Reader::new(t.expect(der::SEQUENCE)?);
    let not_before = der::time(validity.read()?)?;
    let not_after = der::time(validity.read()?)?;
    validity.finish()?;
    let subject_der = t.expect_whole(der::SEQUENCE)?;
    let subject = name(Reader::new(subject_der).expect(der::SEQUENCE)?)?;
    let key = spki(t.expect(der::SEQUENCE)?)?;
    t.optional(0x81)?; // issuerUniqueID
    t.optional(0x82)?; // subjectUniqueID
    let mut dns_names = Vec::new();
    let mut uris = Vec::new();
    let mut is_ca = false;
    if let Some(exts) = t.optional(0xa3)? {
        let mut wrapper = Reader::new(exts);
        let mut list = Reader::new(wrapper.expect(der::SEQUENCE)?);
        wrapper.finish()?;
        while !list.is_empty() {
            let mut ext = Reader::new(list.expect(der::SEQUENCE)?);
            let oid = der::oid_arcs(ext.expect(der::OID)?)?;
            ext.optional(der::BOOLEAN)?;
            let value = ext.expect(der::OCTET_STRING)?;
            ext.finish()?;
            if oid == OID_SAN {
                (dns_names, uris) = san_names(value)?;
            } else if oid == OID_BASIC_CONSTRAINTS {
                is_ca = basic_constraints_ca(value)?;
            }
        }
    }
    t.finish()?;
    Ok(Summary {
        subject,
        subject_der: subject_der.to_vec(),
        issuer,
        not_before,
        not_after,
        dns_names,
        uris,
        is_ca,
        key,
        serial,
    })
}

fn name(value: &[u8]) -> Result<Name, CertReadError> {
    let mut out = Name::default();
    let mut rdns = Reader::new(value);
    while !rdns.is_empty() {
        let mut set = Reader::new(rdns.expect(der::SET)?);
        let mut in_set = 0;
        while !set.is_empty() {
            let mut atv = Reader::new(set.expect(der::SEQUENCE)?);
            let oid = der::oid_arcs(atv.expect(der::OID)?)?;
            let Tlv { tag, value } = atv.read()?;
            atv.finish()?;
            if out.attrs.len() == MAX_ATTRS {
                return Err(CertReadError::Unsupported("name with that many attributes"));
            }
            out.attrs.push(NameAttr {
                oid,
                tag,
                value: value.to_vec(),
            });
            in_set += 1;
        }
        out.multi_valued |= in_set > 1;
    }
    Ok(out)
}

fn spki(value: &[u8]) -> Result<PublicKey, CertReadError> {
    let mut r = Reader::new(value);
    let mut alg = Reader::new(r.expect(der::SEQUENCE)?);
    let oid = der::oid_arcs(alg.expect(der::OID)?)?;
    let bits = r.expect(der::BIT_STRING)?;
    r.finish()?;
    if oid != OID_ED25519 {
        return Ok(PublicKey::Other(der::oid_text(&oid)));
    }
    // RFC 8410: no parameters; the BIT STRING is 0 unused bits + 32 bytes.
    alg.finish()?;
    match bits {
        [0, key @ ..] => key
            .try_into()
            .map(PublicKey::Ed25519)
            .map_err(|_| CertReadError::Unsupported("Ed25519 key length")),
        _ => Err(CertReadError::Unsupported("Ed25519 key encoding")),
    }
}

/// The dNSName and uniformResourceIdentifier entries, at most
/// [`MAX_NAMES`] of each.
fn san_names(value: &[u8]) -> Result<(Vec<String>, Vec<String>), CertReadError> {
    let mut wrapper = Reader::new(value);
    let mut names = Reader::new(wrapper.expect(der::SEQUENCE)?);
    wrapper.finish()?;
    let (mut dns, mut uris) = (Vec::new(), Vec::new());
    while !names.is_empty() {
        let gn = names.read()?;
        let into = match gn.tag {
            SAN_DNS => &mut dns,
            SAN_URI => &mut uris,
            _ => continue,
        };
        if into.len() < MAX_NAMES {
            into.push(string_value(0x16, gn.value));
        }
    }
    Ok((dns, uris))
}

fn basic_constraints_ca(value: &[u8]) -> Result<bool, CertReadError> {
    let mut wrapper = Reader::new(value);
    let mut bc = Reader::new(wrapper.expect(der::SEQUENCE)?);
    wrapper.finish()?;
    Ok(match bc.optional(der::BOOLEAN)? {
        Some([0xff]) => true,
        Some([0x00]) | None => false,
        Some(_) => return Err(DerError::BadValue("boolean").into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_names_with_control_characters_escaped() {
        let n = Name {
            attrs: vec![
                NameAttr {
                    oid: vec![2, 5, 4, 3],
                    tag: 0x0c,
                    value: b"r\x1b[1m".to_vec(),
                },
                NameAttr {
                    oid: vec![1, 2, 3],
                    tag: 0x13,
                    value: b"x".to_vec(),
                },
            ],
            multi_valued: false,
        };
        assert_eq!(n.to_string(), "CN=r\\x1b[1m, 1.2.3=x");
        assert_eq!(n.common_name().as_deref(), Some("r\\x1b[1m"));
    }

    #[test]
    fn refuses_oversized_truncated_and_trailing_input() {
        assert_eq!(
            read(&vec![0u8; MAX_CERT_DER + 1]),
            Err(CertReadError::TooLarge(MAX_CERT_DER + 1))
        );
        assert!(matches!(
            read(&[0x30, 0x05, 0x30]),
            Err(CertReadError::Der(_))
        ));
        assert!(matches!(
            read(&[0x30, 0x00, 0x00]),
            Err(CertReadError::Der(DerError::Trailing))
        ));
    }
}
