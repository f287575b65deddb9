//! The registration reply's answer to `public_ipv6` (DESIGN §9, docs/
//! ipv6.md), in the shape the nexilume SDK parses: `public_ipv6`, and
//! the endpoint both as `public_endpoint{address, port, scheme,
//! tls_server_name, ca_bundle_id}` and as the flat `public_port`,
//! `tls_server_name`, `ca_bundle_id` — only when the address is bound
//! *and* served here. Whatever happened, our extension
//! `public_ipv6_status` says it; the registration succeeds either way.

use agentd::ipc::message::Ipv6Grant;
use serde_json::{json, Value};

use crate::core::agent_door::Door;

/// Adds the answer to `reply` (a register reply's JSON).
pub fn answer(reply: &mut Value, grant: &Ipv6Grant, door: &Door) {
    match (grant, door) {
        (Ipv6Grant::Bound(addr), Door::Open(e)) => {
            let address = addr.to_string();
            reply["public_ipv6"] = json!(address);
            reply["public_endpoint"] = json!({
                "address": address,
                "port": e.port,
                "scheme": "https",
                "tls_server_name": &*e.tls_server_name,
                "ca_bundle_id": &*e.ca_bundle_id,
            });
            reply["public_port"] = json!(e.port);
            reply["tls_server_name"] = json!(&*e.tls_server_name);
            reply["ca_bundle_id"] = json!(&*e.ca_bundle_id);
            reply["public_ipv6_status"] = json!({"address": address, "served": true});
        }
        (Ipv6Grant::Bound(addr), Door::Closed(why)) => {
            reply["public_ipv6_status"] = json!({
                "address": addr.to_string(),
                "served": false,
                "code": "ipv6_not_served",
                "reason": format!("the address is bound on this router but not served: {why}"),
            });
        }
        (Ipv6Grant::NotBound { why, reason }, _) => {
            reply["public_ipv6_status"] = json!({
                "address": null,
                "served": false,
                "code": why.as_str(),
                "reason": &**reason,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::agent_door::Endpoint;

    fn open() -> Door {
        Door::Open(Endpoint {
            port: 7443,
            tls_server_name: "router-b".into(),
            ca_bundle_id: "agentd-ca-0011223344556677".into(),
        })
    }

    #[test]
    fn a_served_address_gets_both_shapes_of_the_endpoint() {
        let mut v = json!({"route_id": "r1"});
        answer(
            &mut v,
            &Ipv6Grant::Bound("2001:db8::7".parse().unwrap()),
            &open(),
        );
        assert_eq!(v["public_ipv6"], "2001:db8::7");
        assert_eq!(v["public_endpoint"]["address"], v["public_ipv6"]);
        assert_eq!(v["public_endpoint"]["scheme"], "https");
        assert_eq!(v["public_endpoint"]["port"], 7443);
        assert_eq!(v["public_port"], 7443);
        assert_eq!(v["tls_server_name"], "router-b");
        assert_eq!(v["public_endpoint"]["ca_bundle_id"], v["ca_bundle_id"]);
        assert_eq!(v["public_ipv6_status"]["served"], true);
    }

    #[test]
    fn nothing_the_sdk_reads_is_offered_unless_served() {
        for (grant, door) in [
            (
                Ipv6Grant::Bound("2001:db8::7".parse().unwrap()),
                Door::Closed("auth is 'none'".into()),
            ),
            (
                Ipv6Grant::NotBound {
                    why: agentd::ipc::message::Ipv6Refusal::Full,
                    reason: "all 256 bound".into(),
                },
                open(),
            ),
        ] {
            let mut v = json!({});
            answer(&mut v, &grant, &door);
            for k in [
                "public_ipv6",
                "public_endpoint",
                "public_port",
                "tls_server_name",
                "ca_bundle_id",
            ] {
                assert!(v.get(k).is_none(), "{k} in {v}");
            }
            assert_eq!(v["public_ipv6_status"]["served"], false);
            assert!(v["public_ipv6_status"]["code"]
                .as_str()
                .unwrap()
                .starts_with("ipv6_"));
            assert!(v["public_ipv6_status"]["reason"].as_str().unwrap().len() > 5);
        }
    }
}
