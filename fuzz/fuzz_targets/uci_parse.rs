//! UCI text from untrusted bytes: parsing never panics, and whatever
//! parses survives write → parse unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uci_schema::uci::Package;

fuzz_target!(|data: &[u8]| {
    let Ok(pkg) = Package::parse_bytes(data) else { return };
    let text = pkg.write().expect("a parsed package is writable");
    let back = Package::parse(&text).expect("written text parses");
    assert_eq!(back, pkg);
    // The typed layer must not panic on anything the parser accepts.
    let _ = uci_schema::Config::from_package(&pkg, "fuzz");
});
