//! A peer router the data plane may talk to: one whose ARPX session is
//! established, as agentd publishes it in the FIB.

/// An established peer: whom to dial, and the only key it may present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub router_id: Box<str>,
    /// Raw Ed25519 key its ARPX session verified.
    pub key: [u8; 32],
    /// `host:port` of its data plane.
    pub data: Box<str>,
    /// Calls over it carry forwarding assertions (a peer outside our
    /// domain, or `peer.sign_calls`); otherwise the link authenticates
    /// them and the call's identity travels in headers (`identity`).
    pub signed: bool,
    /// How the data plane reaches it: dialled, through the tunnel it
    /// opened to us (our relay client), or dialled and also holding our
    /// tunnel (our relay).
    pub relay: agentd::fib::LinkRelay,
}
