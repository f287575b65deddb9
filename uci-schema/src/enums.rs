//! Enumerated option values. Each enum's UCI spellings are declared once,
//! here, and the schema table refers to them (`Auth::NAMES`), so the
//! validator, the typed config and the docs cannot disagree.

use std::fmt;

/// What the typed config needs from an enumerated option.
pub trait UciEnum: Copy + 'static {
    /// Every value; the first is a fallback never used for valid input.
    const ALL: &'static [Self];
    fn from_name(s: &str) -> Option<Self>;
    fn as_str(self) -> &'static str;
}

macro_rules! uci_enum {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $var:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $var),+ }

        impl $name {
            /// UCI spellings, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$var => $s),+ }
            }

            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$var),)+ _ => None }
            }
        }

        impl UciEnum for $name {
            const ALL: &'static [$name] = $name::ALL;
            fn from_name(s: &str) -> Option<$name> {
                $name::from_name(s)
            }
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

uci_enum! {
    /// How callers authenticate to agent-gw.
    pub enum Auth {
        /// Bearer JWTs (EdDSA) from tenant keys or the router's issuer.
        Jwt = "jwt",
        /// No authentication: lab use only, never the default.
        None = "none",
    }
}

uci_enum! {
    /// Verdict of a policy rule (and of `default_action`).
    pub enum Action { Allow = "allow", Deny = "deny" }
}

uci_enum! {
    /// How discovered routers become peers.
    pub enum Admission {
        Off = "off",
        Manual = "manual",
        SameDomain = "same-domain",
        Allowlist = "allowlist",
    }
}

uci_enum! {
    /// Per-agent IPv6 /128 address management.
    pub enum Ipv6Mode { Off = "off", RoutedPrefix = "routed-prefix", NdpProxy = "ndp-proxy" }
}

uci_enum! {
    /// Role in NAT relaying.
    pub enum RelayMode { Off = "off", Client = "client", Server = "server" }
}

uci_enum! {
    /// Protocol a `mapping` section exposes a capability through.
    pub enum Protocol { Mcp = "mcp", A2a = "a2a" }
}

uci_enum! {
    /// syslog / stderr verbosity.
    pub enum LogLevel { Error = "error", Warn = "warn", Info = "info", Debug = "debug", Trace = "trace" }
}

uci_enum! {
    /// Where a route came from (policy constraint `sources`).
    pub enum RouteSource { Local = "local", Static = "static", Peer = "peer", Relay = "relay" }
}

uci_enum! {
    /// How a route's origin was proven, weakest first (policy constraint
    /// `min_proof`; docs/trust-model.md).
    pub enum ProofLevel { None = "none", Bootstrap = "bootstrap", Static = "static", Jwt = "jwt" }
}

uci_enum! {
    /// Effect class of a capability contract.
    pub enum Effect { Read = "read", Write = "write", External = "external" }
}

uci_enum! {
    /// How endpoint health is probed.
    pub enum HealthCheck {
        Off = "off",
        /// TCP connect to the endpoint's host and port.
        Tcp = "tcp",
        /// HTTP `GET /healthz` on the endpoint's host and port.
        Http = "http",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_name() {
        for a in Admission::ALL {
            assert_eq!(Admission::from_name(a.as_str()), Some(*a));
        }
        assert_eq!(Admission::from_name("same_domain"), None);
        assert_eq!(Auth::NAMES, &["jwt", "none"]);
    }
}
