//! What goes into and comes out of an [`Instance`](super::Instance): the
//! contract with the driver (agentd's `daemon/peers`), and — serialised
//! as JSON lines — the conformance vectors under `arpx/tests/conformance`.

use std::collections::BTreeMap;

use edkey::SigningKey;
use serde::{Deserialize, Serialize};

use crate::frame::FrameError;
use crate::message::{Attrs, Close, ContractRef, Message, OriginProof, RouteAd};

/// The router's own settings (from `config arpx` and `agentd.identity`).
#[derive(Clone, Debug)]
pub struct InstanceConfig {
    pub router_id: String,
    /// Empty: no domain.
    pub domain: String,
    /// Changes on every daemon start (the driver uses wall-clock ms at
    /// start); it also seeds our routes' serial numbers so they never go
    /// backwards across a restart.
    pub boot_epoch: u64,
    /// Signs our local routes; never serialised.
    pub key: SigningKey,
    pub heartbeat_ms: u32,
    pub miss_limit: u32,
    pub graceful_ms: u64,
    pub reflector: bool,
    pub max_path: usize,
    pub max_frame: usize,
    /// Most paths held from one neighbour for one origin router.
    pub max_routes_per_origin: usize,
    /// Vouches for origin keys by certificate; `None`: no domain CA.
    pub origin_ca: Option<super::keys::OriginCaRef>,
    /// Our certificate (DER) from the domain CA, attached to our routes so
    /// routers that never meet us can authenticate our key; empty: none.
    pub cert: Vec<u8>,
}

/// One `peer` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerConfig {
    pub router_id: String,
    pub max_routes: usize,
    /// Tenants whose routes may be exported to this peer; empty: every
    /// tenant.
    pub export_tenants: Vec<String>,
    /// Serve this peer reflected (peer-learned) routes even when this
    /// router is not a reflector.
    pub reflector_client: bool,
    /// The highest trust (0–100) a route learned from this peer is
    /// granted, whatever it advertises; applied before reflection.
    pub max_trust: u64,
    /// The strongest origin proof a route learned from this peer may
    /// claim (a neighbour's `jwt` is its own word); applied before
    /// reflection.
    #[serde(default = "strongest_proof")]
    pub max_proof: OriginProof,
    /// Send this peer routes at all. Off for a relay a client router
    /// holds a session with while it proves itself (DESIGN §7): the
    /// session is up, but the mesh must not see a path through it until
    /// it is the relay in use.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub export: bool,
    /// The peer is a client router behind NAT that reaches the mesh
    /// through us (we are its relay): the paths it gives us are passed on
    /// to every peer, reflector or not, since no other router can reach
    /// it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay_client: bool,
}

fn yes() -> bool {
    true
}

// serde's `skip_serializing_if` passes a reference: the conformance
// vectors keep their shape while the fields hold their defaults.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_yes(v: &bool) -> bool {
    *v
}

fn strongest_proof() -> OriginProof {
    OriginProof::Jwt
}

/// A connection, numbered by the driver; never reused.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Ord, PartialOrd, Serialize, Deserialize)]
pub struct ConnId(pub u64);

/// Every timer the instance arms. Expiry comes back as [`Input::Timer`];
/// a timer of a connection that has ended is ignored.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Timer {
    /// Send our next heartbeat.
    Heartbeat(ConnId),
    /// The peer's hold time may have passed (checked against the last
    /// frame received, so frames never re-arm it).
    Hold(ConnId),
    /// The peer's Open is overdue.
    OpenWait(ConnId),
    /// A lost peer's retained paths expire.
    Graceful(String),
}

/// A local or static route to export (agentd's RIB entry, without its LAN
/// endpoint: the next hop is this router).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalRoute {
    pub route_id: String,
    pub capability: String,
    pub version: u32,
    pub origin_agent: String,
    pub tenant: String,
    pub region: String,
    pub attrs: Attrs,
    pub allowed_tenants: Vec<String>,
    pub allowed_sources: Vec<String>,
    pub contract: Option<ContractRef>,
    /// Remaining lease (ms) at this upsert; 0 = permanent (static).
    pub lease_ms: u64,
    /// How the registrant proved the origin.
    pub proof: OriginProof,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// A TLS session is up; `peer` is the verified router id, `peer_key`
    /// its Ed25519 key (from the certificate). The instance sends Open.
    Connected {
        conn: ConnId,
        peer: String,
        #[serde(with = "hex32")]
        peer_key: [u8; 32],
        outbound: bool,
    },
    Frame {
        conn: ConnId,
        msg: Message,
    },
    /// The driver's FrameReader failed: the instance answers with the
    /// typed Close (FrameError::close_code) and disconnects.
    FrameError {
        conn: ConnId,
        #[serde(with = "frame_error")]
        error: FrameError,
    },
    /// Transport closed or failed (EOF, reset, TLS error).
    Disconnected {
        conn: ConnId,
        error: String,
    },
    Timer(Timer),
    /// Every change of a local/static route (the instance sends nothing
    /// when the exported fields did not change: renewals cost nothing).
    UpsertLocal(LocalRoute),
    /// The local route ended (unregister, lease expiry, removal, unhealthy).
    WithdrawLocal(String),
    /// The whole peer set (start and every reload). Removed peers get
    /// Close{PeerRemoved}; changed export rules re-evaluate what each
    /// session has been sent (deltas only).
    ConfigurePeers(Vec<PeerConfig>),
    /// Daemon stop: Close{AdminShutdown} on every session.
    Shutdown,
    /// Everything output for `conn` before an [`Output::NotifyWritten`]
    /// has been written to the transport (our snapshot goes on).
    Written {
        conn: ConnId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Output {
    Send {
        conn: ConnId,
        msg: Message,
    },
    /// Nothing more will be sent on `conn`: flush, then close it.
    Disconnect {
        conn: ConnId,
    },
    /// (Re)arm `timer` to fire at `at_ms`; replaces an earlier setting.
    SetTimer {
        timer: Timer,
        at_ms: u64,
    },
    CancelTimer(Timer),
    /// Feed [`Input::Written`] once every `Send` for `conn` output before
    /// this one has been written to the transport. Our snapshot to a
    /// session goes a chunk at a time, each when an earlier one is
    /// written, so it holds a few chunks' memory, never the whole table's,
    /// and never overruns the driver's send queue.
    NotifyWritten {
        conn: ConnId,
    },
    /// Install or replace the path to `ad.route_id` via `peer`. The
    /// advertisement comes without its origin certificate (`origin_cert`
    /// empty): the instance has taken what it proves into its key
    /// directory, and holds one copy per origin router.
    ///
    /// Boxed: an advertisement is six times the size of every other
    /// output, and the end of a session queues one output per path
    /// (10k paths were 4.5 MB of `PathDown`s sized like a `PathUp`).
    PathUp {
        peer: String,
        ad: Box<RouteAd>,
    },
    /// Remove the path to `route_id` via `peer`.
    PathDown {
        peer: String,
        route_id: String,
    },
    /// Paths of one Update from `peer` were refused or given up while its
    /// session stays (route limits, contradicted origin keys): for the
    /// log; `last` says why the last one was.
    PathsDropped {
        peer: String,
        count: u64,
        last: String,
    },
    /// The peer's paths become eligible (its snapshot completed) or not
    /// (session lost; they stay until PathDown). Sent on changes only.
    PeerEligible {
        peer: String,
        up: bool,
    },
    /// Informational, for the dialer and logs: a session reached
    /// Established (Opens exchanged) / ended.
    SessionUp {
        peer: String,
        conn: ConnId,
    },
    SessionDown {
        peer: String,
        conn: ConnId,
        close: Option<Close>,
        by_us: bool,
        error: Option<String>,
    },
}

/// Where a peer's session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerState {
    /// No connection.
    Idle,
    /// Connected, our Open sent, the peer's not yet received.
    OpenSent,
    /// Opens exchanged; the peer's snapshot is arriving (its paths are
    /// not eligible yet).
    Snapshot,
    /// The peer's snapshot completed; deltas flow.
    Established,
}

impl PeerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Idle => "idle",
            PeerState::OpenSent => "open_sent",
            PeerState::Snapshot => "snapshot",
            PeerState::Established => "established",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub router_id: String,
    pub state: PeerState,
    /// When it entered that state (the instance's clock).
    pub since_ms: u64,
    /// Paths held from it.
    pub routes_in: usize,
    /// Routes currently advertised to it.
    pub routes_out: usize,
    /// Whether its paths are eligible.
    pub eligible: bool,
    /// The last transport error (driver-reported handshake errors are the
    /// driver's).
    pub last_error: Option<String>,
    /// The last Close, and whether we sent it.
    pub last_close: Option<(Close, bool)>,
    /// The boot epoch of its last Open.
    pub boot_epoch: Option<u64>,
    /// Paths refused or given up (route limits, origin keys contradicting
    /// an authenticated key) while its session stayed up.
    #[serde(default)]
    pub dropped_routes: u64,
    /// Why the last one was.
    #[serde(default)]
    pub last_drop: Option<String>,
}

/// Event counts since start. Messages and routes are counted apart: an
/// Update message carries many routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub sessions_established: u64,
    pub updates_in: u64,
    pub routes_in: u64,
    pub withdraws_in: u64,
    pub withdrawn_in: u64,
    pub updates_out: u64,
    pub routes_out: u64,
    pub withdraws_out: u64,
    pub withdrawn_out: u64,
    /// Closes we sent, by code name.
    pub closes_sent: BTreeMap<&'static str, u64>,
    /// Closes peers sent us, by code name.
    pub closes_received: BTreeMap<&'static str, u64>,
    /// Sessions closed for a path containing us or repeating a router.
    pub rejected_loop: u64,
    /// Advertisements dropped for a path longer than `max_path`.
    pub rejected_path_too_long: u64,
    /// Sessions closed for an origin signature that does not verify.
    pub rejected_bad_signature: u64,
    /// Advertisements dropped, or paths removed, for an origin key that
    /// contradicts the known key of that origin router (an authenticated
    /// key replacing a learned one removes the paths of the learned one).
    #[serde(default)]
    pub rejected_origin_key: u64,
    /// Attached origin certificates that our domain CA did not vouch for
    /// (or that name another key than the route carries); the route is
    /// judged without them.
    #[serde(default)]
    pub rejected_origin_cert: u64,
    /// Advertisements dropped (or paths removed) because another origin
    /// router holds the route_id.
    pub rejected_origin_conflict: u64,
    /// Paths refused because their neighbour or their origin router is at
    /// its limit (`peer.max_routes`, `arpx.max_routes_per_origin`).
    pub rejected_route_limit: u64,
    /// Paths of the largest origin given up so that a smaller origin's
    /// path fits a full neighbour budget (fair shares).
    #[serde(default)]
    pub evicted_fair_share: u64,
    /// Advertisements ignored for a serial lower than the one held.
    pub ignored_stale: u64,
    /// Our advertisements not sent: too large for a frame, or a local
    /// route breaking the wire rules.
    pub export_refused: u64,
}

/// 32 bytes as hex in JSON, raw elsewhere.
mod hex32 {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::bytes::Bytes;

    pub fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        Bytes(*v).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        Bytes::<32>::deserialize(d).map(|b| b.0)
    }
}

/// A [`FrameError`] in the conformance vectors. postcard's error and the
/// static field names of [`crate::message::Invalid`] have no serde of
/// their own, so they travel by name.
mod frame_error {
    use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

    use crate::frame::FrameError;
    use crate::message::{Invalid, Problem};

    #[derive(Serialize, Deserialize)]
    enum Repr {
        TooLarge { len: usize, max: usize },
        Decode(String),
        Trailing(usize),
        Invalid { field: String, problem: ProblemRepr },
    }

    #[derive(Serialize, Deserialize)]
    enum ProblemRepr {
        Empty,
        Syntax,
        Zero,
        OutOfRange,
        TooLong(usize),
        TooMany(usize),
        NotOriginFirst,
    }

    /// The field names [`Invalid`] uses (see `message.rs`).
    const FIELDS: &[&str] = &[
        "open.router_id",
        "open.domain",
        "open.heartbeat_ms",
        "update.routes",
        "withdraw.route_ids",
        "withdraw.route_id",
        "close.reason",
        "route.route_id",
        "route.capability",
        "route.version",
        "route.origin_agent",
        "route.tenant",
        "route.region",
        "route.load_permille",
        "route.trust",
        "route.allowed_tenants",
        "route.allowed_sources",
        "route.origin_router",
        "route.path",
    ];

    const POSTCARD: &[(postcard::Error, &str)] = &[
        (
            postcard::Error::DeserializeUnexpectedEnd,
            "DeserializeUnexpectedEnd",
        ),
        (
            postcard::Error::DeserializeBadVarint,
            "DeserializeBadVarint",
        ),
        (postcard::Error::DeserializeBadBool, "DeserializeBadBool"),
        (postcard::Error::DeserializeBadChar, "DeserializeBadChar"),
        (postcard::Error::DeserializeBadUtf8, "DeserializeBadUtf8"),
        (
            postcard::Error::DeserializeBadOption,
            "DeserializeBadOption",
        ),
        (postcard::Error::DeserializeBadEnum, "DeserializeBadEnum"),
        (
            postcard::Error::DeserializeBadEncoding,
            "DeserializeBadEncoding",
        ),
    ];

    pub fn serialize<S: Serializer>(e: &FrameError, s: S) -> Result<S::Ok, S::Error> {
        let repr = match e {
            FrameError::TooLarge { len, max } => Repr::TooLarge {
                len: *len,
                max: *max,
            },
            FrameError::Decode(p) => Repr::Decode(format!("{p:?}")),
            FrameError::Trailing(n) => Repr::Trailing(*n),
            FrameError::Invalid(i) => Repr::Invalid {
                field: i.field.to_owned(),
                problem: match i.problem {
                    Problem::Empty => ProblemRepr::Empty,
                    Problem::Syntax => ProblemRepr::Syntax,
                    Problem::Zero => ProblemRepr::Zero,
                    Problem::OutOfRange => ProblemRepr::OutOfRange,
                    Problem::TooLong(n) => ProblemRepr::TooLong(n),
                    Problem::TooMany(n) => ProblemRepr::TooMany(n),
                    Problem::NotOriginFirst => ProblemRepr::NotOriginFirst,
                },
            },
        };
        repr.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FrameError, D::Error> {
        Ok(match Repr::deserialize(d)? {
            Repr::TooLarge { len, max } => FrameError::TooLarge { len, max },
            Repr::Trailing(n) => FrameError::Trailing(n),
            Repr::Decode(name) => {
                let e = POSTCARD
                    .iter()
                    .find(|(_, n)| *n == name)
                    .map(|(e, _)| e.clone())
                    .ok_or_else(|| de::Error::custom(format!("unknown decode error {name}")))?;
                FrameError::Decode(e)
            }
            Repr::Invalid { field, problem } => {
                let field = FIELDS
                    .iter()
                    .find(|f| **f == field)
                    .ok_or_else(|| de::Error::custom(format!("unknown field {field}")))?;
                FrameError::Invalid(Invalid::new(
                    field,
                    match problem {
                        ProblemRepr::Empty => Problem::Empty,
                        ProblemRepr::Syntax => Problem::Syntax,
                        ProblemRepr::Zero => Problem::Zero,
                        ProblemRepr::OutOfRange => Problem::OutOfRange,
                        ProblemRepr::TooLong(n) => Problem::TooLong(n),
                        ProblemRepr::TooMany(n) => Problem::TooMany(n),
                        ProblemRepr::NotOriginFirst => Problem::NotOriginFirst,
                    },
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Invalid, Problem};

    #[test]
    fn frame_errors_in_inputs_round_trip_through_json() {
        let errors = [
            FrameError::TooLarge {
                len: 70_000,
                max: 65_536,
            },
            FrameError::Decode(postcard::Error::DeserializeBadVarint),
            FrameError::Trailing(3),
            FrameError::Invalid(Invalid::new("route.tenant", Problem::Syntax)),
            FrameError::Invalid(Invalid::new("route.path", Problem::TooMany(64))),
        ];
        for error in errors {
            let input = Input::FrameError {
                conn: ConnId(4),
                error,
            };
            let json = serde_json::to_string(&input).unwrap();
            assert_eq!(
                serde_json::from_str::<Input>(&json).unwrap(),
                input,
                "{json}"
            );
        }
        let unknown =
            r#"{"FrameError":{"conn":1,"error":{"Invalid":{"field":"nope","problem":"Empty"}}}}"#;
        assert!(serde_json::from_str::<Input>(unknown).is_err());
    }

    #[test]
    fn a_peer_key_travels_as_hex_in_json() {
        let input = Input::Connected {
            conn: ConnId(1),
            peer: "router-a".into(),
            peer_key: [0xab; 32],
            outbound: true,
        };
        let json = serde_json::to_string(&input).unwrap();
        assert!(json.contains(&"ab".repeat(32)), "{json}");
        assert_eq!(serde_json::from_str::<Input>(&json).unwrap(), input);
    }
}
