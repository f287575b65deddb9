//! The A2A 1.0 agent card (`/.well-known/agent-card.json`): who answers,
//! where the JSON-RPC interface is, and the skills the caller may use.
//!
//! The interface URL must be one the caller can reach, because the
//! official client sends every RPC to the URL inside the card: the
//! configured `gateway.public_url` when set, else the scheme of the
//! listener that took the request and the request's `Host` (which the
//! Host/Origin check has already accepted as one of the router's names).

use serde_json::{json, Value};

/// The protocol version served (`supportedInterfaces[].protocolVersion`).
pub const PROTOCOL_VERSION: &str = "1.0";

/// One skill as the card lists it (an `a2a` mapping).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub capability: String,
    pub version: u32,
}

/// What a card says.
#[derive(Clone, Debug)]
pub struct Card<'a> {
    pub name: String,
    pub description: String,
    /// The JSON-RPC endpoint URL.
    pub rpc_url: String,
    pub skills: &'a [Skill],
}

/// Media types every skill accepts and answers (see `part`).
const MODES: [&str; 2] = ["application/json", "text/plain"];

impl Card<'_> {
    pub fn to_value(&self) -> Value {
        let skills: Vec<Value> = self
            .skills
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "name": s.name,
                    "description": s.description,
                    "tags": [s.capability, format!("v{}", s.version)],
                })
            })
            .collect();
        json!({
            "name": self.name,
            "description": self.description,
            "version": env!("CARGO_PKG_VERSION"),
            "supportedInterfaces": [{
                "url": self.rpc_url,
                "protocolBinding": "JSONRPC",
                "protocolVersion": PROTOCOL_VERSION,
            }],
            "capabilities": {
                "streaming": true,
                "pushNotifications": false,
                "extendedAgentCard": false,
            },
            "defaultInputModes": MODES,
            "defaultOutputModes": MODES,
            "skills": skills,
        })
    }
}

/// Whether `host` is a plausible `Host` header value (a name or an
/// address, with an optional port): it is echoed into the card.
pub fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_')
        })
}

/// The base URL (no trailing slash) a caller reaches this gateway at.
pub fn base_url(public_url: &str, scheme: &str, host: Option<&str>) -> Option<String> {
    if !public_url.is_empty() {
        return Some(public_url.trim_end_matches('/').to_string());
    }
    let host = host.filter(|h| valid_host(h))?;
    Some(format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_names_the_interface_and_the_skills() {
        let skills = [Skill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "says it back".into(),
            capability: "demo.echo".into(),
            version: 2,
        }];
        let c = Card {
            name: "agentd r1".into(),
            description: "d".into(),
            rpc_url: "http://192.0.2.1:7446/a2a".into(),
            skills: &skills,
        }
        .to_value();
        assert_eq!(
            c["supportedInterfaces"][0]["url"],
            "http://192.0.2.1:7446/a2a"
        );
        assert_eq!(c["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(c["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["skills"][0]["id"], "echo");
        assert_eq!(c["skills"][0]["tags"][0], "demo.echo");
    }

    #[test]
    fn the_url_is_the_public_one_or_the_host_used() {
        assert_eq!(
            base_url("https://r.example/", "http", Some("x")).as_deref(),
            Some("https://r.example")
        );
        assert_eq!(
            base_url("", "http", Some("[2001:db8::1]:7446")).as_deref(),
            Some("http://[2001:db8::1]:7446")
        );
        assert_eq!(base_url("", "http", None), None);
        assert_eq!(base_url("", "http", Some("a/b")), None);
        assert_eq!(base_url("", "http", Some("a b")), None);
    }
}
