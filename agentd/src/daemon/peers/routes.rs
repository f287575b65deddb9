//! agentd's routes ↔ ARPX, field by field.
//!
//! Out: a local or static [`Route`] becomes an `arpx` [`LocalRoute`]
//! (never its LAN endpoint: the next hop is this router). In: an
//! advertisement ([`RouteAd`]) from a peer becomes a [`PeerPath`] for the
//! RIB, whose endpoint is that peer's data plane.

use arpx::instance::LocalRoute;
use arpx::message::{self as wire, Attrs, ContractRef, OriginProof, RouteAd};
use arpx::Bytes;
use edkey::Sha256;

use super::settings::PeerSettings;
use crate::daemon::state::PeerPath;
use crate::route::{
    self, Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource,
};
use crate::time::Millis;

/// What a local/static route change means for the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// Advertise (or re-advertise, if an exported field changed).
    Upsert(Box<LocalRoute>),
    /// Not eligible any more (lease over, unhealthy): withdraw.
    Withdraw(String),
}

/// The mesh's view of one of our routes at `now`: eligible routes are
/// exported, the others withdrawn (health excludes, lease end removes).
pub fn export(route: &Route, now: Millis) -> Option<Export> {
    if !matches!(route.source, RouteSource::Local | RouteSource::Static) {
        return None;
    }
    let id = route.id.as_str().to_string();
    let lease_ms = match route.lease {
        Lease::Permanent => 0,
        Lease::Until(deadline) if deadline > now => deadline.saturating_sub(now).max(1),
        Lease::Until(_) => return Some(Export::Withdraw(id)),
    };
    if !route.healthy {
        return Some(Export::Withdraw(id));
    }
    Some(Export::Upsert(Box::new(LocalRoute {
        route_id: id,
        capability: route.capability.to_string(),
        version: route.version,
        origin_agent: route.origin.to_string(),
        tenant: route.tenant.to_string(),
        region: route.region.to_string(),
        attrs: Attrs {
            latency_ms: route.attrs.latency_ms,
            cost_micros: route.attrs.cost_micros,
            load_permille: route.attrs.load_permille,
            trust: route.attrs.trust,
        },
        allowed_tenants: strings(&route.access.allowed_tenants),
        allowed_sources: strings(&route.access.allowed_sources),
        contract: route.contract.as_deref().map(contract_ref),
        lease_ms,
        proof: origin_proof(route),
    })))
}

/// How `route`'s registrant proved its origin, as the mesh is told: an
/// operator's route (static, or registered by an administrator over IPC)
/// is `static`; a LAN registration says what its credential was
/// ([`route::OriginProof::of_local`], recomputed here so that the wire
/// never says more than the owner shows).
pub fn origin_proof(route: &Route) -> OriginProof {
    wire_proof(route::OriginProof::of_local(route.source, route.owner))
}

/// agentd's proof level as ARPX carries it.
pub fn wire_proof(p: route::OriginProof) -> OriginProof {
    match p {
        route::OriginProof::None => OriginProof::None,
        route::OriginProof::Bootstrap => OriginProof::Bootstrap,
        route::OriginProof::Static => OriginProof::Static,
        route::OriginProof::Jwt => OriginProof::Jwt,
    }
}

/// An advertisement's proof level in agentd's route model.
pub fn local_proof(p: OriginProof) -> route::OriginProof {
    match p {
        OriginProof::None => route::OriginProof::None,
        OriginProof::Bootstrap => route::OriginProof::Bootstrap,
        OriginProof::Static => route::OriginProof::Static,
        OriginProof::Jwt => route::OriginProof::Jwt,
    }
}

fn strings(v: &[Box<str>]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn wire_effect(e: Effect) -> wire::Effect {
    match e {
        Effect::Read => wire::Effect::Read,
        Effect::Write => wire::Effect::Write,
        Effect::External => wire::Effect::External,
    }
}

fn local_effect(e: wire::Effect) -> Effect {
    match e {
        wire::Effect::Read => Effect::Read,
        wire::Effect::Write => Effect::Write,
        wire::Effect::External => Effect::External,
    }
}

/// The effect and idempotence a forwarding router needs, plus a SHA-256
/// that names the full contract (schema and description stay at the
/// origin; a changed schema changes the digest, hence the advertisement).
pub fn contract_ref(c: &Contract) -> ContractRef {
    ContractRef {
        effect: wire_effect(c.effect),
        idempotent: c.idempotent,
        digest: Bytes(contract_digest(c)),
    }
}

/// SHA-256 over a length-prefixed encoding of every contract field, so
/// no two different contracts share a byte string.
pub fn contract_digest(c: &Contract) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"agentd-contract-v1\0");
    h.update([match c.effect {
        Effect::Read => 0u8,
        Effect::Write => 1,
        Effect::External => 2,
    }]);
    h.update([u8::from(c.idempotent)]);
    for field in [&c.input_schema, &c.description] {
        match field {
            None => h.update([0u8]),
            Some(text) => {
                h.update([1u8]);
                h.update((text.len() as u64).to_be_bytes());
                h.update(text.as_bytes());
            }
        }
    }
    h.finalize()
}

/// A peer's advertisement as a RIB path via `peer` (whose data plane is
/// the endpoint).
pub fn peer_path(ad: &RouteAd, peer: &PeerSettings) -> Result<PeerPath, String> {
    let route_id = RouteId::new(&ad.route_id).map_err(|e| e.to_string())?;
    let boxed = |v: &[String]| v.iter().map(|s| s.as_str().into()).collect();
    Ok(PeerPath {
        route_id,
        capability: ad.capability.as_str().into(),
        version: ad.version,
        origin_agent: ad.origin_agent.as_str().into(),
        tenant: ad.tenant.as_str().into(),
        region: ad.region.as_str().into(),
        attrs: Attributes {
            latency_ms: ad.attrs.latency_ms,
            cost_micros: ad.attrs.cost_micros,
            load_permille: ad.attrs.load_permille,
            // The router's trust, not the advertiser's: what the origin
            // claims, lowered by every router on the way and by our cap
            // for this neighbour (docs/trust-model.md).
            trust: ad.attrs.trust.min(ad.trust_limit).min(peer.max_trust),
        },
        access: Access {
            allowed_tenants: boxed(&ad.allowed_tenants),
            allowed_sources: boxed(&ad.allowed_sources),
        },
        effect: ad.contract.as_ref().map(|c| local_effect(c.effect)),
        idempotent: ad.contract.as_ref().is_some_and(|c| c.idempotent),
        path: ad.path.iter().map(|p| p.as_str().into()).collect(),
        next_hop: peer.router_id.as_str().into(),
        next_hop_address: peer.address.as_str().into(),
        next_hop_data_port: peer.data_port,
        healthy: true,
        // The origin router's word, lowered by every router on the way
        // and by our cap for this neighbour (docs/trust-model.md).
        proof: local_proof(ad.proof.min(ad.proof_limit).min(peer.max_proof)),
        source: if peer.relay == super::settings::RelayRole::Client {
            RouteSource::Relay
        } else {
            RouteSource::Peer
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(lease: Lease) -> Route {
        Route {
            id: RouteId::new("r-1").unwrap(),
            capability: "demo.echo".into(),
            version: 2,
            origin: "agent://lab/echo".into(),
            endpoint: "http://192.0.2.10:8080/invoke".into(),
            tenant: "lab".into(),
            region: "eu".into(),
            attrs: Attributes {
                latency_ms: 5,
                cost_micros: 7,
                load_permille: 100,
                trust: 90,
            },
            access: Access {
                allowed_tenants: vec!["guest".into()],
                allowed_sources: vec!["agent://lab/*".into()],
            }
            .into(),
            contract: Some(Box::new(Contract {
                effect: Effect::Write,
                idempotent: true,
                input_schema: Some("{\"type\":\"object\"}".into()),
                description: Some("echo".into()),
            })),
            source: RouteSource::Local,
            path: Box::default(),
            next_hop: None,
            lease,
            healthy: true,
            allow_loopback: false,
            owner: None,
            proof: Default::default(),
            disputed: false,
        }
    }

    #[test]
    fn a_local_route_exports_every_field_but_its_endpoint() {
        let r = local(Lease::Until(Millis(31_000)));
        let Some(Export::Upsert(l)) = export(&r, Millis(1_000)) else {
            panic!("exported")
        };
        assert_eq!(l.route_id, "r-1");
        assert_eq!(l.capability, "demo.echo");
        assert_eq!(l.version, 2);
        assert_eq!(l.origin_agent, "agent://lab/echo");
        assert_eq!((l.tenant.as_str(), l.region.as_str()), ("lab", "eu"));
        assert_eq!(
            (
                l.attrs.latency_ms,
                l.attrs.cost_micros,
                l.attrs.load_permille,
                l.attrs.trust
            ),
            (5, 7, 100, 90)
        );
        assert_eq!(l.allowed_tenants, ["guest"]);
        assert_eq!(l.allowed_sources, ["agent://lab/*"]);
        let c = l.contract.unwrap();
        assert_eq!((c.effect, c.idempotent), (wire::Effect::Write, true));
        assert_eq!(c.digest.0, contract_digest(r.contract.as_ref().unwrap()));
        assert_eq!(l.lease_ms, 30_000);
        // Static: permanent.
        let s = Route {
            source: RouteSource::Static,
            ..local(Lease::Permanent)
        };
        let Some(Export::Upsert(l)) = export(&s, Millis(1_000)) else {
            panic!()
        };
        assert_eq!(l.lease_ms, 0);
    }

    #[test]
    fn expired_or_unhealthy_routes_are_withdrawn_and_peer_paths_ignored() {
        let r = local(Lease::Until(Millis(1_000)));
        assert_eq!(
            export(&r, Millis(1_000)),
            Some(Export::Withdraw("r-1".into()))
        );
        let sick = Route {
            healthy: false,
            ..local(Lease::Permanent)
        };
        assert_eq!(
            export(&sick, Millis(0)),
            Some(Export::Withdraw("r-1".into()))
        );
        let peer = Route {
            source: RouteSource::Peer,
            ..local(Lease::Permanent)
        };
        assert_eq!(export(&peer, Millis(0)), None);
    }

    #[test]
    fn the_contract_digest_covers_every_field() {
        let base = *local(Lease::Permanent).contract.unwrap();
        let d = contract_digest(&base);
        let variants = [
            Contract {
                effect: Effect::Read,
                ..base.clone()
            },
            Contract {
                idempotent: false,
                ..base.clone()
            },
            Contract {
                input_schema: None,
                ..base.clone()
            },
            Contract {
                description: Some("echo!".into()),
                ..base.clone()
            },
            // Moving text between fields changes the digest too.
            Contract {
                input_schema: Some("echo".into()),
                description: Some("{\"type\":\"object\"}".into()),
                ..base.clone()
            },
        ];
        for v in variants {
            assert_ne!(contract_digest(&v), d, "{v:?}");
        }
        assert_eq!(contract_digest(&base.clone()), d);
    }

    /// Peer router-b at `address`, granting its routes trust 40 at most.
    fn router_b(address: &str) -> PeerSettings {
        PeerSettings {
            router_id: "router-b".into(),
            address: address.into(),
            port: 7444,
            data_port: 7447,
            key_fingerprint: None,
            reflector_client: false,
            sign_calls: false,
            max_routes: 10,
            export_tenants: Vec::new(),
            max_trust: 40,
            max_proof: OriginProof::Jwt,
            relay: Default::default(),
        }
    }

    #[test]
    fn an_advertisement_becomes_a_path_via_its_peer_data_plane() {
        let mut ad = arpx::testing::ad("r-9", &["router-a", "router-b"]);
        ad.contract = Some(ContractRef {
            effect: wire::Effect::External,
            idempotent: false,
            digest: Bytes([1; 32]),
        });
        ad.allowed_tenants = vec!["guest".into()];
        let peer = router_b("2001:db8::2");
        ad.proof = OriginProof::Jwt;
        let p = peer_path(&ad, &peer).unwrap();
        assert_eq!(p.proof, route::OriginProof::Jwt, "the signed proof is kept");
        assert_eq!(p.route_id.as_str(), "r-9");
        assert_eq!(p.effect, Some(Effect::External));
        assert!(!p.idempotent);
        assert_eq!(&*p.next_hop, "router-b");
        assert_eq!(p.path.len(), 2);
        let route = p.into_route().unwrap();
        assert_eq!(
            (route.proof, route.disputed),
            (route::OriginProof::Jwt, false)
        );
        assert_eq!(route.id.as_str(), "r-9@router-b");
        assert_eq!(&*route.endpoint, "https://[2001:db8::2]:7447");
        assert_eq!(&*route.access.allowed_tenants[0], "guest");
    }

    #[test]
    fn a_peer_path_gets_the_least_trust_of_its_claim_the_path_and_our_cap() {
        let peer = router_b("192.0.2.2");
        let mut ad = arpx::testing::ad("r-9", &["router-a", "router-b"]);
        let trust = |ad: &RouteAd| peer_path(ad, &peer).unwrap().attrs.trust;
        ad.attrs.trust = 100;
        assert_eq!(trust(&ad), 40, "our cap for the neighbour");
        ad.trust_limit = 10;
        assert_eq!(trust(&ad), 10, "a router on the way allowed less");
        ad.trust_limit = 100;
        ad.attrs.trust = 5;
        assert_eq!(trust(&ad), 5, "the claim itself");
    }

    #[test]
    fn a_peer_path_gets_the_weakest_of_its_proof_the_path_limit_and_our_cap() {
        let mut peer = router_b("192.0.2.2");
        let mut ad = arpx::testing::ad("r-9", &["router-a", "router-b"]);
        let proof = |ad: &RouteAd, peer: &PeerSettings| peer_path(ad, peer).unwrap().proof;
        ad.proof = OriginProof::Jwt;
        assert_eq!(proof(&ad, &peer), route::OriginProof::Jwt);
        ad.proof_limit = OriginProof::Bootstrap;
        assert_eq!(
            proof(&ad, &peer),
            route::OriginProof::Bootstrap,
            "a router on the way"
        );
        ad.proof_limit = OriginProof::Jwt;
        peer.max_proof = OriginProof::Static;
        assert_eq!(
            proof(&ad, &peer),
            route::OriginProof::Static,
            "our cap for the neighbour"
        );
    }
}
