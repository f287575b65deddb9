//! Arbitrary `_arpx._tcp` TXT RDATA from another router on the LAN: the
//! bounded decoder must return a record or a typed error, never panic,
//! and whatever it accepts must encode to something that decodes to the
//! same record.
#![no_main]

use agentd::discovery::record::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Record::from_rdata(data) {
        assert_eq!(Record::from_rdata(&r.to_rdata()).as_ref(), Ok(&r));
    }
    // The same bytes as one key/value list (how mdns-sd hands them over).
    let pairs = data.split(|b| *b == b'\n').map(|s| match s.iter().position(|b| *b == b'=') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    });
    let _ = Record::from_pairs(pairs);
});
