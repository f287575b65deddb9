//! Which IPv6 addresses cannot be used yet: still in duplicate address
//! detection (RFC 4862 §5.4), or failed it.
//!
//! `getifaddrs` lists a tentative address like any other, but the kernel
//! sends nothing from it: a multicast packet on a link whose only IPv6
//! address is tentative fails with `EADDRNOTAVAIL`, and a peer that is
//! told the address cannot reach it yet. The flags are in
//! `/proc/net/if_inet6`, one line per address: address (32 hex digits),
//! interface index, prefix length, scope and flags (hex), device name.

use std::io::Read;
use std::net::Ipv6Addr;

/// `IFA_F_TENTATIVE`: duplicate address detection is running.
const TENTATIVE: u32 = 0x40;
/// `IFA_F_DADFAILED`: another node holds the address.
const DAD_FAILED: u32 = 0x08;

/// The file is the kernel's, but a host with thousands of addresses
/// should not make one reading unbounded: 4 096 lines of at most 64 bytes.
const MAX_BYTES: u64 = 256 * 1024;

/// Why an address cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unready {
    /// Detection is running; it ends in a second or two.
    Tentative,
    /// Another node holds the address (the kernel keeps it, tentative,
    /// until it is removed): it is not ours.
    Failed,
}

/// The addresses no packet can be sent from, by interface name.
pub fn unready() -> Vec<(Box<str>, Ipv6Addr, Unready)> {
    let mut text = String::new();
    match std::fs::File::open("/proc/net/if_inet6") {
        Ok(f) => {
            if f.take(MAX_BYTES).read_to_string(&mut text).is_err() {
                return Vec::new();
            }
        }
        Err(_) => return Vec::new(),
    }
    parse(&text)
}

/// The tentative and failed addresses `text` (the format of
/// `/proc/net/if_inet6`) lists; a line that does not parse is skipped.
pub fn parse(text: &str) -> Vec<(Box<str>, Ipv6Addr, Unready)> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [addr, _index, _len, _scope, flags, dev] = f[..] else {
                return None;
            };
            let flags = u32::from_str_radix(flags, 16).ok()?;
            let state = if flags & DAD_FAILED != 0 {
                Unready::Failed
            } else if flags & TENTATIVE != 0 {
                Unready::Tentative
            } else {
                return None;
            };
            if addr.len() != 32 {
                return None;
            }
            let addr = u128::from_str_radix(addr, 16).ok()?;
            Some((dev.into(), Ipv6Addr::from(addr), state))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tentative_and_failed_addresses_are_named_by_device_with_their_state() {
        let text = "\
fd000000000000000000000000000002 04 40 00 82     eth0
fe8000000000000000fc00fffe000001 04 40 20 c0     eth0
fe800000000000000000000000000001 05 40 20 88   veth-a
00000000000000000000000000000001 01 80 10 80       lo
2001db80000000000000000000000009 06 40 00 04   opt0
zz 06 40 00 40 bad
2001db8000000000000000000000000a 06 40 00 4g   bad2
";
        assert_eq!(
            parse(text),
            [
                (
                    "eth0".into(),
                    "fe80::fc:ff:fe00:1".parse().unwrap(),
                    Unready::Tentative
                ),
                ("veth-a".into(), "fe80::1".parse().unwrap(), Unready::Failed),
            ]
        );
    }
}
