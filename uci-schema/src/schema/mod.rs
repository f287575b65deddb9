//! The schema of `/etc/config/agentd`, declared once as data.
//!
//! [`SECTIONS`] lists every section type and, for each, every option with
//! its value kind, default, range and a line of documentation. The typed
//! [`Config`](crate::Config) reads through this table (defaults and ranges
//! come from here, nowhere else), `agentd --check-config` validates with
//! it, and `defaults_doc` (feature `docs`) renders it as the
//! reference page — so the three cannot drift apart.

mod check;
mod labels;
mod table;

use std::fmt;

pub use check::{
    agent_uri, check_value, fingerprint, parse_bool, parse_ip_net, parse_jwt_key, parse_uint,
    MAX_ID_LEN,
};
pub use table::SECTIONS;

/// One section type.
#[derive(Debug)]
pub struct SectionSpec {
    pub ty: &'static str,
    /// `false`: at most one section of this type (its settings have a
    /// single meaning per router). `true`: any number.
    pub many: bool,
    /// Name `Config::to_package` gives a singleton section.
    pub canonical_name: &'static str,
    pub doc: &'static str,
    pub options: &'static [OptionSpec],
}

/// The help text of a section or option, as the table is built: the
/// text itself with the `docs` feature, else empty. Only this crate's
/// generators read it (the reference page, the feed's commented config,
/// LuCI's `schema.js`: all written by its tests); the daemons never show
/// it, and in their binary it was ~18 KB of a router's flash. Evaluated
/// at compile time, so without the feature the text is not in the file.
pub const fn doc_text(text: &'static str) -> &'static str {
    if cfg!(feature = "docs") {
        text
    } else {
        ""
    }
}

/// One option of a section type.
#[derive(Debug)]
pub struct OptionSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Written with `list` lines (a single `option` line is accepted as a
    /// one-item list).
    pub list: bool,
    pub default: DefaultValue,
    /// If the empty string is accepted, what it means.
    pub empty: Option<&'static str>,
    pub doc: &'static str,
}

/// What an absent option means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// The option must be present.
    Required,
    /// This value, in UCI spelling (it goes through the same checks as
    /// user input; a test makes sure every default passes them).
    Text(&'static str),
    /// These list items.
    Items(&'static [&'static str]),
    /// The section's name; required in anonymous sections.
    SectionName,
}

/// Prefix lengths per-agent addresses may come from: /64 is the smallest
/// on-link subnet NDP proxying and SLAAC work with, a /48 the largest a
/// site is usually delegated.
pub const AGENT_PREFIX_LEN: std::ops::RangeInclusive<u8> = 48..=64;

/// What values an option accepts. `Display` gives the phrase used in
/// errors: "expected {kind}".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `1`/`0` (also `yes`/`no`, `on`/`off`, `true`/`false`,
    /// `enabled`/`disabled`, as OpenWrt's shell helpers accept).
    Bool,
    /// Unsigned decimal integer in `min..=max`.
    UInt { min: u64, max: u64 },
    /// One of these spellings.
    Enum(&'static [&'static str]),
    /// Any text.
    Text,
    /// Printable ASCII without spaces (pairing codes).
    Token,
    /// Key fingerprint `sha256:` + 64 hex digits (either case, as
    /// `router_pki::Fingerprint` parses it; `agentctl pki show` prints
    /// lower case): what a peer pins and an allowlist lists.
    Fingerprint,
    /// Absolute file system path.
    Path,
    /// `ip:port` or `[ipv6]:port`.
    SocketAddr,
    /// `host:port` where host is a DNS name, IPv4 address or `[IPv6]`.
    HostPort,
    /// DNS name or IP address.
    Host,
    /// IP address, optionally with `:port` (`[v6]:port`).
    Resolver,
    /// DNS label: `[A-Za-z0-9-]{1,63}`, not starting or ending with `-`.
    DnsLabel,
    /// DNS name: dot-separated DNS labels, at most 253 bytes.
    DomainName,
    /// Network interface name: `[A-Za-z0-9._@-]{1,15}`.
    Ifname,
    /// The prefix per-agent addresses come from: IPv6 `addr/len`,
    /// [`AGENT_PREFIX_LEN`] long, global unicast (2000::/3) or unique
    /// local (fc00::/7); or `auto` (the router's delegated or WAN prefix).
    AgentPrefix,
    /// IPv4 or IPv6 network `addr/len`; a bare address is a host (`/32`,
    /// `/128`).
    IpNet,
    /// Identifier `[A-Za-z0-9._-]{1,128}` (tenant, capability, region).
    Name,
    /// Route id `[A-Za-z0-9._:-]{1,128}`.
    RouteId,
    /// `*`, an exact value, or `prefix.*` (`admin.*`).
    Pattern,
    /// Agent URI `agent://tenant/name`.
    AgentUri,
    /// `http://` or `https://` URL.
    Url,
    /// Ed25519 public key `ed25519:` + base64 of 32 bytes.
    JwtKey,
    /// A JSON object (e.g. a JSON Schema).
    JsonObject,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Bool => f.write_str("a boolean '1' or '0'"),
            Kind::UInt { min, max } => write!(f, "an integer {min}..={max}"),
            Kind::Enum(names) => {
                f.write_str("one of ")?;
                for (i, n) in names.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "'{n}'")?;
                }
                Ok(())
            }
            Kind::Text => f.write_str("text"),
            Kind::Token => f.write_str("printable ASCII without spaces"),
            Kind::Fingerprint => f.write_str("a key fingerprint 'sha256:' and 64 hex digits"),
            Kind::Path => f.write_str("an absolute path"),
            Kind::SocketAddr => f.write_str("an address 'ip:port' or '[ipv6]:port'"),
            Kind::HostPort => f.write_str("'host:port'"),
            Kind::Host => f.write_str("a host name or IP address"),
            Kind::Resolver => f.write_str("an IP address, optionally with ':port'"),
            Kind::DnsLabel => f.write_str("a DNS label (letters, digits, inner '-', at most 63)"),
            Kind::DomainName => f.write_str("a DNS domain name"),
            Kind::Ifname => f.write_str("an interface name (at most 15 characters)"),
            Kind::AgentPrefix => f.write_str(
                "'auto' or an IPv6 prefix 'addr/len' of /48 to /64 in 2000::/3 or fc00::/7",
            ),
            Kind::IpNet => f.write_str("an IP network 'addr/len' or an address"),
            Kind::Name => f.write_str("a name of letters, digits, '.', '_' and '-'"),
            Kind::RouteId => f.write_str("an id of letters, digits, '.', '_', ':' and '-'"),
            Kind::Pattern => f.write_str("'*', an exact name, or 'prefix.*'"),
            Kind::AgentUri => f.write_str("an agent URI 'agent://tenant/name'"),
            Kind::Url => f.write_str("an http:// or https:// URL"),
            Kind::JwtKey => f.write_str("'ed25519:' followed by a base64 32-byte public key"),
            Kind::JsonObject => f.write_str("a JSON object"),
        }
    }
}

/// The spec of section type `ty`.
pub fn section_spec(ty: &str) -> Option<&'static SectionSpec> {
    SECTIONS.iter().find(|s| s.ty == ty)
}

impl SectionSpec {
    pub fn option(&self, name: &str) -> Option<&'static OptionSpec> {
        self.options.iter().find(|o| o.name == name)
    }

    /// The short human label of option `name` (a form field's title); the
    /// option's name if it has none (a test requires one for each).
    pub fn label(&self, name: &'static str) -> &'static str {
        labels::LABELS
            .iter()
            .find(|(t, o, _)| *t == self.ty && *o == name)
            .map_or(name, |(_, _, l)| l)
    }
}

/// The spelling of an option's empty meaning ("disabled", "none") where
/// `''` cannot say it. libuci does not store an option set to `''`: it
/// drops `option x ''` when it reads the file (so rpcd and LuCI never see
/// it and the next `uci commit` writes the file without it), and `uci
/// set`/LuCI's `uci.set` with `''` delete the option. An empty value is
/// therefore the same as an absent one, its default, everywhere — in the
/// daemons too (`config::read`) — and `off` is the only way to turn off a
/// listener that is on by default.
pub const OFF: &str = "off";

impl OptionSpec {
    /// Checks one value (one list item for list options) against this
    /// option's kind, honouring `empty`.
    pub fn check(&self, value: &str) -> bool {
        self.means_empty(value) || check_value(self.kind, value)
    }

    /// `value` is the empty value of this option: [`OFF`] where the option
    /// has an empty meaning and `off` is not itself one of its values, or
    /// `''` where that meaning is also the default (`''` reads as absent).
    pub fn means_empty(&self, value: &str) -> bool {
        self.empty.is_some()
            && ((value.is_empty() && self.default == DefaultValue::Text(""))
                || (value == OFF && !check_value(self.kind, OFF)))
    }

    /// The empty meaning needs [`OFF`]: the default is something else, so
    /// `''` (read as absent) cannot say it.
    pub fn needs_off(&self) -> bool {
        self.empty.is_some() && self.default != DefaultValue::Text("")
    }
}
