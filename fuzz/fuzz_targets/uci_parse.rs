//! UCI text from untrusted bytes: parsing never panics, and whatever
//! parses survives write → parse unchanged. The prefix parser agrees with
//! the strict one, and a partial load keeps only a valid configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uci_schema::uci::Package;

fuzz_target!(|data: &[u8]| {
    let prefix = Package::parse_bytes_prefix(data);
    match (&prefix.cut, Package::parse_bytes(data)) {
        (None, Ok(pkg)) => assert_eq!(pkg, prefix.pkg),
        (Some(cut), Err(e)) => assert_eq!(cut.error, e),
        (cut, strict) => panic!("prefix {cut:?} disagrees with strict {strict:?}"),
    }
    let text = prefix.pkg.write().expect("a parsed prefix is writable");
    assert_eq!(Package::parse(&text).as_ref(), Ok(&prefix.pkg));
    if let Ok(text) = std::str::from_utf8(data) {
        let kept = uci_schema::Config::from_str_partial(text, "fuzz").config;
        if let Err(e) = uci_schema::Config::from_package(&kept.to_package(), "kept") {
            panic!("partial load kept an invalid config: {e}");
        }
    }
    let Ok(pkg) = Package::parse_bytes(data) else { return };
    let text = pkg.write().expect("a parsed package is writable");
    let back = Package::parse(&text).expect("written text parses");
    assert_eq!(back, pkg);
    // The typed layer must not panic on anything the parser accepts.
    let _ = uci_schema::Config::from_package(&pkg, "fuzz");
});
