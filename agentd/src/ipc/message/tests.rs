use super::*;
use crate::ipc::frame;

fn registration() -> Registration {
    Registration {
        route_id: Some(RouteId::new("r-1").unwrap()),
        capability: "demo.echo".into(),
        version: 1,
        origin: "agent://lab/echo".into(),
        endpoint: "http://192.0.2.10:8080/invoke".into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default(),
        contract: None,
        lease_seconds: None,
        caller: None,
        owner: None,
        public_ipv6: false,
    }
}

fn field_of(r: Result<(), IpcError>) -> String {
    match r {
        Err(IpcError::Invalid { field, .. }) => field.into(),
        other => format!("{other:?}"),
    }
}

#[test]
fn attributes_outside_the_schema_ranges_are_refused_naming_the_field() {
    let mut r = registration();
    r.attrs.load_permille = 5000;
    assert_eq!(field_of(r.validate()), "load_permille");
    let mut r = registration();
    r.attrs.trust = 101;
    assert_eq!(field_of(r.validate()), "trust");
    let mut r = registration();
    r.endpoint = "http://192.0.2.10:0/".into();
    assert_eq!(field_of(r.validate()), "endpoint");
    let mut r = registration();
    r.endpoint = "https://192.0.2.10:443/".into();
    assert_eq!(field_of(r.validate()), "endpoint");
}

#[test]
fn requests_round_trip_through_frames() {
    let reqs = [
        Request {
            id: 1,
            body: RequestBody::Register(registration()),
        },
        Request {
            id: 2,
            body: RequestBody::Renew(Renewal::of(RouteId::new("r-1").unwrap())),
        },
        Request {
            id: 3,
            body: RequestBody::Routes(RoutesQuery {
                capability: Some("demo.echo".into()),
                after: None,
                limit: 10,
            }),
        },
        Request {
            id: u64::MAX,
            body: RequestBody::SubscribeFib,
        },
    ];
    for r in reqs {
        let wire = frame::encode(&r).unwrap();
        let mut d = frame::FrameDecoder::new();
        d.push(&wire);
        assert_eq!(d.next_message::<Request>().unwrap(), Some(r));
    }
}

#[test]
fn hello_encoding_is_frozen() {
    // Protocol 1, software "x": varint 1, length 1, 'x'. If this changes,
    // old and new binaries can no longer tell each other apart.
    assert_eq!(
        frame::encode(&Hello {
            protocol: 1,
            software: "x".into()
        })
        .unwrap(),
        [0, 0, 0, 3, 1, 1, b'x']
    );
}

#[test]
fn valid_registration_passes() {
    assert_eq!(registration().validate(), Ok(()));
}

#[test]
fn validation_names_the_offending_field() {
    let mut r = registration();
    r.capability = "demo echo".into();
    assert_eq!(field_of(r.validate()), "capability");
    let mut r = registration();
    r.version = 0;
    assert_eq!(field_of(r.validate()), "version");
    let mut r = registration();
    r.origin = "agent://other/echo".into();
    assert_eq!(field_of(r.validate()), "origin");
    let mut r = registration();
    r.endpoint = "ftp://192.0.2.10/".into();
    assert_eq!(field_of(r.validate()), "endpoint");
    let mut r = registration();
    r.endpoint = "http:///x".into();
    assert_eq!(field_of(r.validate()), "endpoint");
    let mut r = registration();
    r.access.allowed_tenants = vec!["t".into(); MAX_ACCESS_ENTRIES + 1];
    assert_eq!(field_of(r.validate()), "access.allowed_tenants");
    let mut r = registration();
    r.contract = Some(Contract {
        effect: route::Effect::Read,
        idempotent: true,
        input_schema: Some("{}".repeat(MAX_SCHEMA_LEN).into()),
        description: None,
    });
    assert_eq!(field_of(r.validate()), "contract.input_schema");
}

#[test]
fn error_codes_and_statuses_are_stable() {
    let id = || RouteId::new("r").unwrap();
    let cases = [
        (IpcError::NotFound { route_id: id() }, "not_found", 404),
        (
            IpcError::Conflict {
                route_id: id(),
                reason: ConflictReason::OtherOrigin,
            },
            "conflict",
            409,
        ),
        (
            IpcError::LeaseOutOfRange {
                requested: 1,
                min: 5,
                max: 3600,
            },
            "lease_out_of_range",
            400,
        ),
        (IpcError::invalid("tenant", "empty"), "invalid_field", 400),
        (IpcError::Full { max_routes: 10 }, "full", 503),
        (
            IpcError::PermissionDenied { reason: "x".into() },
            "permission_denied",
            403,
        ),
        (
            IpcError::Unsupported { what: "x".into() },
            "unsupported",
            501,
        ),
        (IpcError::Malformed { reason: "x".into() }, "malformed", 400),
        (
            IpcError::Unavailable { reason: "x".into() },
            "unavailable",
            503,
        ),
        (IpcError::internal("x"), "internal", 500),
    ];
    for (e, code, status) in cases {
        assert_eq!((e.code(), e.http_status()), (code, status), "{e}");
    }
    assert_eq!(
        IpcError::Conflict {
            route_id: id(),
            reason: ConflictReason::OtherTenant
        }
        .to_string(),
        "route r belongs to another tenant"
    );
    assert_eq!(
        IpcError::LeaseOutOfRange {
            requested: 1,
            min: 5,
            max: 3600
        }
        .to_string(),
        "lease of 1 s is outside 5..=3600 s"
    );
}

#[test]
fn admin_views_serialise_to_plain_json() {
    let mut counters = BTreeMap::new();
    counters.insert("requests".into(), 3);
    let stats = serde_json::to_value(StatsView {
        counters,
        gateway: None,
    })
    .unwrap();
    assert_eq!(
        stats,
        serde_json::json!({"counters": {"requests": 3}, "gateway": null})
    );
    let route = route::Route {
        id: RouteId::new("r-1").unwrap(),
        capability: "demo.echo".into(),
        version: 1,
        origin: "agent://lab/echo".into(),
        endpoint: "http://192.0.2.10:8080/".into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default().into(),
        contract: None,
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: route::Lease::Until(Millis(31_500)),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    };
    let v = serde_json::to_value(RouteView::of(&route, Millis(1_000))).unwrap();
    assert_eq!(v["route_id"], "r-1");
    assert_eq!(v["expires_in_s"], 30);
    assert_eq!(v["source"], "Local");
    let back: RouteView = serde_json::from_value(v).unwrap();
    assert_eq!(back, RouteView::of(&route, Millis(1_000)));
}
