//! Value checks for each [`Kind`]. Pure functions on strings; the typed
//! config converts only values that passed here.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use super::Kind;

/// Longest identifier (tenant, capability, route id, agent URI part),
/// matching agentd's route model.
pub const MAX_ID_LEN: usize = 128;

/// Parses an unsigned decimal integer (no sign, no spaces).
pub fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses the boolean spellings OpenWrt's `config_get_bool` accepts.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "yes" | "on" | "true" | "enabled" => Some(true),
        "0" | "no" | "off" | "false" | "disabled" => Some(false),
        _ => None,
    }
}

pub fn check_value(kind: Kind, s: &str) -> bool {
    match kind {
        Kind::Bool => parse_bool(s).is_some(),
        Kind::UInt { min, max } => parse_uint(s).is_some_and(|v| (min..=max).contains(&v)),
        Kind::Enum(names) => names.contains(&s),
        Kind::Text => true,
        Kind::Token => {
            !s.is_empty() && s.len() <= 512 && s.bytes().all(|b| (33..=126).contains(&b))
        }
        Kind::Fingerprint => fingerprint(s).is_some(),
        Kind::Path => s.starts_with('/') && s.len() <= 4096 && !s.chars().any(char::is_control),
        Kind::SocketAddr => s.parse::<SocketAddr>().is_ok(),
        Kind::HostPort => host_port(s),
        Kind::Host => s.parse::<IpAddr>().is_ok() || domain_name(s),
        Kind::Resolver => s.parse::<IpAddr>().is_ok() || s.parse::<SocketAddr>().is_ok(),
        Kind::DnsLabel => dns_label(s),
        Kind::DomainName => domain_name(s),
        Kind::Ifname => {
            (1..=15).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
        }
        Kind::AgentPrefix => s == "auto" || agent_prefix(s),
        Kind::IpNet => parse_ip_net(s).is_some(),
        Kind::Name => token(s, &[]),
        Kind::RouteId => token(s, b":"),
        Kind::Pattern => pattern(s),
        Kind::AgentUri => agent_uri(s).is_some(),
        Kind::Url => url(s),
        Kind::JwtKey => s
            .strip_prefix("ed25519:")
            .and_then(base64_len)
            .is_some_and(|n| n == 32),
        Kind::JsonObject => {
            matches!(
                serde_json::from_str::<serde_json::Value>(s),
                Ok(serde_json::Value::Object(_))
            )
        }
    }
}

/// The 32 key bytes of a valid `ed25519:BASE64` value (standard or
/// URL-safe alphabet, padding optional), as [`Kind::JwtKey`] accepts it.
pub fn parse_jwt_key(s: &str) -> Option<[u8; 32]> {
    if !check_value(Kind::JwtKey, s) {
        return None;
    }
    let body = s.strip_prefix("ed25519:")?.trim_end_matches('=');
    let sextet = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(33);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in body.bytes() {
        acc = (acc << 6) | sextet(b)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out.try_into().ok()
}

/// The 32 bytes of a `sha256:` + 64 hex digit fingerprint (either case),
/// as [`Kind::Fingerprint`] accepts it. No surrounding spaces: the value
/// is compared as written.
pub fn fingerprint(s: &str) -> Option<[u8; 32]> {
    let hex = s.strip_prefix("sha256:")?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// `[A-Za-z0-9._-]{1,128}` plus `extra` bytes.
fn token(s: &str, extra: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') || extra.contains(&b)
        })
}

fn dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Dot-separated DNS labels, at most 253 bytes, whose last label is not
/// all digits (RFC 3696 §2: no top-level domain is numeric), so a
/// mistyped IPv4 address such as `192.0.2.300` is not taken for a name.
fn domain_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(dns_label)
        && !s
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
}

fn host_port(s: &str) -> bool {
    if s.parse::<SocketAddr>().is_ok() {
        return true;
    }
    match s.rsplit_once(':') {
        Some((host, port)) => {
            domain_name(host) && parse_uint(port).is_some_and(|p| (1..=65535).contains(&p))
        }
        None => false,
    }
}

fn agent_prefix(s: &str) -> bool {
    let Some((addr, len)) = s.split_once('/') else {
        return false;
    };
    let (Ok(a), Some(len)) = (addr.parse::<Ipv6Addr>(), parse_uint(len)) else {
        return false;
    };
    let first = a.segments()[0];
    let len_ok = u8::try_from(len).is_ok_and(|l| super::AGENT_PREFIX_LEN.contains(&l));
    len_ok && (first & 0xe000 == 0x2000 || first & 0xfe00 == 0xfc00)
}

/// Parses `addr/len` (IPv4 or IPv6) or a bare address (a host network)
/// into the address and prefix length. Host bits may be set
/// (`10.1.2.3/8` means `10.0.0.0/8`), as in `ip route` notation.
pub fn parse_ip_net(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(parse_uint(l)?)),
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len as u8))
}

/// `*`, an exact value, or `prefix.*` (the dot belongs to the prefix, so
/// `admin.*` does not match `administrator`) — agentd's `Pattern::parse`.
fn pattern(s: &str) -> bool {
    if s.is_empty() || s.len() > 2 * MAX_ID_LEN || !s.bytes().all(|b| (33..=126).contains(&b)) {
        return false;
    }
    if s == "*" {
        return true;
    }
    match s.strip_suffix(".*") {
        Some(prefix) => !prefix.is_empty() && !prefix.contains('*'),
        None => !s.contains('*'),
    }
}

/// Splits `agent://tenant/name` into its tenant and name, validated as in
/// agentd's route model (the name may hold `/`, `:` and `@`).
pub fn agent_uri(s: &str) -> Option<(&str, &str)> {
    let (tenant, name) = s.strip_prefix("agent://")?.split_once('/')?;
    (token(tenant, &[]) && token(name, b"/:@")).then_some((tenant, name))
}

fn url(s: &str) -> bool {
    let Some(rest) = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
    else {
        return false;
    };
    if s.len() > 512 || !s.bytes().all(|b| (33..=126).contains(&b)) {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return false;
    }
    if authority.starts_with('[') {
        // [v6] or [v6]:port
        return match authority.split_once(']') {
            Some((v6, tail)) => {
                v6[1..].parse::<Ipv6Addr>().is_ok()
                    && (tail.is_empty()
                        || tail
                            .strip_prefix(':')
                            .and_then(parse_uint)
                            .is_some_and(|p| (1..=65535).contains(&p)))
            }
            None => false,
        };
    }
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    (host.parse::<IpAddr>().is_ok() || domain_name(host))
        && port.is_none_or(|p| parse_uint(p).is_some_and(|p| (1..=65535).contains(&p)))
}

/// Decoded length of standard or URL-safe base64 (padding optional), or
/// `None` if `s` is not base64.
fn base64_len(s: &str) -> Option<usize> {
    let body = s.trim_end_matches('=');
    let pad = s.len() - body.len();
    if pad > 2 || body.is_empty() {
        return None;
    }
    let ok = body
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'));
    let rem = body.len() % 4;
    if !ok || rem == 1 || (pad > 0 && !(body.len() + pad).is_multiple_of(4)) {
        return None;
    }
    Some(body.len() / 4 * 3 + rem.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_plain_decimal_within_range() {
        let k = Kind::UInt { min: 1, max: 300 };
        assert!(check_value(k, "1") && check_value(k, "300"));
        for bad in [
            "0",
            "301",
            "-1",
            "+5",
            " 5",
            "5 ",
            "0x10",
            "",
            "1e3",
            "18446744073709551616",
        ] {
            assert!(!check_value(k, bad), "{bad:?} accepted");
        }
        assert_eq!(parse_uint("18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn network_kinds() {
        assert!(check_value(Kind::SocketAddr, "[::]:7443"));
        assert!(check_value(Kind::SocketAddr, "0.0.0.0:7446"));
        assert!(!check_value(Kind::SocketAddr, "localhost:7446"));
        assert!(check_value(Kind::HostPort, "relay.lab.example:7447"));
        assert!(check_value(Kind::HostPort, "[2001:db8::1]:7447"));
        assert!(!check_value(Kind::HostPort, "relay.lab.example"));
        assert!(!check_value(Kind::HostPort, "relay:0"));
        for bad in [
            "host:99999",
            "host:65536",
            "host:",
            ":7447",
            "192.0.2.1:99999",
            "192.0.2.300:7447",
            "[2001:db8::1]:99999",
            "2001:db8::1:7447",
        ] {
            assert!(!check_value(Kind::HostPort, bad), "{bad:?} accepted");
        }
        assert!(check_value(Kind::HostPort, "host:65535"));
        assert!(!check_value(Kind::Host, "192.0.2.300"));
        assert!(!check_value(Kind::Host, "1.2.3"));
        assert!(check_value(Kind::Host, "router-1.example"));
        assert!(check_value(Kind::Host, "9lives.example"));
        assert!(!check_value(Kind::Url, "http://192.0.2.300/x"));
        assert!(!check_value(Kind::IpNet, "192.0.2.0/-1"));
        assert!(!check_value(Kind::IpNet, "2001:db8::/129"));
        assert!(check_value(Kind::Host, "192.0.2.2"));
        assert!(check_value(Kind::Host, "router-b.lab.example"));
        assert!(!check_value(Kind::Host, "router b"));
        for ok in ["2001:db8:1::/64", "2001:db8::/48", "fd00:1::/56", "auto"] {
            assert!(check_value(Kind::AgentPrefix, ok), "{ok}");
        }
        for bad in [
            "2001:db8:1::/129",
            "2001:db8:1::/65",
            "2001:db8::/47",
            "fe80::/64",
            "ff02::/64",
            "::/64",
            "192.0.2.0/24",
            "Auto",
            "",
        ] {
            assert!(!check_value(Kind::AgentPrefix, bad), "{bad}");
        }
        assert!(check_value(Kind::IpNet, "192.0.2.0/24"));
        assert!(check_value(Kind::IpNet, "fd00::/8"));
        assert!(check_value(Kind::IpNet, "::1"));
        assert!(!check_value(Kind::IpNet, "192.0.2.0/33"));
        assert!(!check_value(Kind::IpNet, "192.0.2.0/"));
        assert!(!check_value(Kind::IpNet, "192.0.2.0/+8"));
        assert!(!check_value(Kind::IpNet, "lan"));
        assert_eq!(parse_ip_net("::1"), Some(("::1".parse().unwrap(), 128)));
        assert_eq!(
            parse_ip_net("10.1.2.3/8"),
            Some(("10.1.2.3".parse().unwrap(), 8))
        );
        assert!(check_value(Kind::Resolver, "192.0.2.53"));
        assert!(check_value(Kind::Resolver, "[2001:db8::53]:53"));
    }

    #[test]
    fn names_and_patterns() {
        assert!(check_value(Kind::DnsLabel, "router-a"));
        assert!(!check_value(Kind::DnsLabel, "-router"));
        assert!(!check_value(Kind::DnsLabel, "router_a"));
        assert!(check_value(Kind::DomainName, "lab.example"));
        assert!(!check_value(Kind::DomainName, "lab..example"));
        assert!(check_value(Kind::Pattern, "*"));
        assert!(check_value(Kind::Pattern, "admin.*"));
        assert!(check_value(Kind::Pattern, "agent://lab/printer"));
        assert!(!check_value(Kind::Pattern, "agent://lab/*"));
        assert!(!check_value(Kind::Pattern, "admin*"));
        assert!(!check_value(Kind::Pattern, ".*"));
        assert!(!check_value(Kind::Pattern, "a*b"));
        assert!(check_value(Kind::RouteId, "static:printer"));
        assert!(!check_value(Kind::Name, "static:printer"));
    }

    #[test]
    fn agent_uris_and_urls() {
        assert_eq!(agent_uri("agent://lab/printer"), Some(("lab", "printer")));
        assert_eq!(agent_uri("agent://lab/a/b"), Some(("lab", "a/b")));
        assert_eq!(agent_uri("agent://lab"), None);
        assert_eq!(agent_uri("agent://la b/x"), None);
        assert!(check_value(Kind::Url, "http://192.0.2.10:8080/invoke"));
        assert!(check_value(Kind::Url, "https://[2001:db8::10]:8443/x"));
        assert!(check_value(Kind::Url, "http://printer.lab.example/invoke"));
        assert!(!check_value(Kind::Url, "ftp://192.0.2.10/"));
        assert!(!check_value(Kind::Url, "http://192.0.2.10:0/"));
        assert!(!check_value(Kind::Url, "http://user@192.0.2.10/"));
        assert!(!check_value(Kind::Url, "http:// 192.0.2.10/"));
    }

    #[test]
    fn jwt_keys_decode_to_their_bytes() {
        let key = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
        let bytes = parse_jwt_key(key).unwrap();
        assert_eq!(&bytes[..4], &[0xd7, 0x5a, 0x98, 0x01]);
        assert_eq!(bytes[31], 0x1a);
        assert_eq!(parse_jwt_key("ed25519:AAAA"), None);
    }

    #[test]
    fn jwt_keys_must_decode_to_32_bytes() {
        let key = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
        assert!(check_value(Kind::JwtKey, key));
        assert!(check_value(Kind::JwtKey, key.trim_end_matches('=')));
        assert!(!check_value(Kind::JwtKey, "ed25519:AAAA"));
        assert!(!check_value(
            Kind::JwtKey,
            "rsa:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
        ));
        assert!(!check_value(
            Kind::JwtKey,
            "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHUR!="
        ));
    }

    /// A pin is checked like every other typed value: the prefix, exactly
    /// 64 hex digits, nothing around them.
    #[test]
    fn fingerprints_are_sha256_and_exactly_64_hex_digits() {
        let hex = "0123456789abcdef".repeat(4);
        let good = format!("sha256:{hex}");
        assert!(check_value(Kind::Fingerprint, &good));
        assert!(check_value(
            Kind::Fingerprint,
            &good.to_uppercase().replacen("SHA256", "sha256", 1)
        ));
        assert_eq!(fingerprint(&good).unwrap()[..2], [0x01, 0x23]);
        assert_eq!(fingerprint(&good).unwrap()[31], 0xef);
        for bad in [
            format!("sha257:{hex}"),
            format!("SHA256:{hex}"),
            format!("sha256:{hex}0"),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{}g", &hex[1..]),
            format!(" sha256:{hex}"),
            format!("sha256:{hex} "),
            format!("sha256:{}", "ab:".repeat(32)),
            "sha256:".to_string(),
            "sha256:00".to_string(),
            hex.clone(),
        ] {
            assert!(!check_value(Kind::Fingerprint, &bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn json_schema_must_be_an_object() {
        assert!(check_value(Kind::JsonObject, r#"{"type":"object"}"#));
        assert!(!check_value(Kind::JsonObject, "[1]"));
        assert!(!check_value(Kind::JsonObject, "{"));
    }
}
