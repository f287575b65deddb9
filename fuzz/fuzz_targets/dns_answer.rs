//! Arbitrary bytes as a resolver's answer to a unicast DNS-SD question:
//! the bounded decoder returns an answer or a typed error, never
//! panics; whatever it accepts drives a lookup round (PTR, then every
//! question the round asks answered with the same bytes), which must
//! stay within its bounds.
#![no_main]

use agentd::discovery::unicast::answer::{decode, Kind, Question};
use agentd::discovery::unicast::browse::{BrowseSettings, Browser, Event, MAX_INSTANCES};
use agentd::time::Millis;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = data.get(..2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let require_ad = data.get(2).is_some_and(|b| b & 1 == 1);
    let ptr = Question {
        name: "_arpx._tcp.lab.example".into(),
        kind: Kind::Ptr,
    };
    let _ = decode(data, id, &ptr, require_ad);

    let mut b = Browser::new(
        BrowseSettings {
            domains: vec!["lab.example".into()],
            require_dnssec: require_ad,
            refresh_min_ms: 1000,
            refresh_max_ms: 60_000,
        },
        Millis(0),
    );
    let mut asks: Vec<_> = b
        .tick(Millis(0))
        .into_iter()
        .filter_map(|e| match e {
            Event::Ask(a) => Some(a),
            _ => None,
        })
        .collect();
    let mut answered = 0;
    while let Some(ask) = asks.pop() {
        answered += 1;
        assert!(answered <= 1 + 4 * MAX_INSTANCES, "a round asks a bounded number of questions");
        let result = decode(data, id, &ask.question, require_ad);
        for e in b.answered(&ask, result, Millis(1)) {
            match e {
                Event::Ask(a) => asks.push(a),
                Event::Found(f) => assert!(!f.addresses.is_empty()),
                Event::Lost { .. } => {}
            }
        }
    }
    assert!(b.status()[0].instances <= MAX_INSTANCES);
});
