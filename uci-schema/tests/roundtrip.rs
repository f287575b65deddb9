//! `parse(write(p)) == p`: exact canonical output for a known package, and
//! a property check over generated packages and generated text (a small
//! deterministic generator, so failures reproduce from the printed seed).

use uci_schema::uci::{Package, Section, UciOption, Value, WriteErrorKind};

#[test]
fn writer_output_is_canonical_uci_export_format() {
    let mut main = Section::new("agentd", Some("main".into()));
    main.set("router_id", "router-a");
    main.set("quote", "it's");
    main.set("empty", "");
    let mut anon = Section::new("rule", None);
    anon.set_list("sources", vec!["local".into(), "peer".into()]);
    let pkg = Package {
        name: Some("agentd".into()),
        sections: vec![main, anon],
    };
    let text = pkg.write().unwrap();
    assert_eq!(
        text,
        "package agentd\n\nconfig agentd 'main'\n\toption router_id 'router-a'\n\toption quote 'it'\\''s'\n\toption empty ''\n\nconfig rule\n\tlist sources 'local'\n\tlist sources 'peer'\n"
    );
    assert_eq!(Package::parse(&text).unwrap(), pkg);
}

#[test]
fn odd_section_types_are_quoted_and_read_back() {
    let pkg = Package {
        name: None,
        sections: vec![
            Section::new("we'ird#;\\\"type", None),
            Section::new("a.b-c", None),
        ],
    };
    let text = pkg.write().unwrap();
    assert!(
        text.starts_with("config 'we'\\''ird#;\\\"type'\n"),
        "{text}"
    );
    assert!(text.contains("config a.b-c\n"));
    assert_eq!(Package::parse(&text).unwrap(), pkg);
}

#[test]
fn unwritable_packages_are_refused_not_corrupted() {
    let bad = |sections: Vec<Section>| {
        Package {
            name: None,
            sections,
        }
        .write()
        .unwrap_err()
        .kind
    };
    assert_eq!(
        bad(vec![Section::new("has space", None)]),
        WriteErrorKind::InvalidType
    );
    assert_eq!(
        bad(vec![Section::new("t", Some("a-b".into()))]),
        WriteErrorKind::InvalidSectionName
    );
    assert_eq!(
        bad(vec![
            Section::new("t", Some("a".into())),
            Section::new("u", Some("a".into()))
        ]),
        WriteErrorKind::DuplicateSectionName
    );
    let mut s = Section::new("t", None);
    s.options.push(UciOption {
        name: "o".into(),
        value: Value::List(vec![]),
    });
    assert_eq!(bad(vec![s]), WriteErrorKind::EmptyList);
    let mut s = Section::new("t", None);
    s.set("o", "a\0b");
    assert_eq!(bad(vec![s]), WriteErrorKind::NulInValue);
    let mut s = Section::new("t", None);
    s.options.push(UciOption {
        name: "o".into(),
        value: Value::Single("1".into()),
    });
    s.options.push(UciOption {
        name: "o".into(),
        value: Value::Single("2".into()),
    });
    assert_eq!(bad(vec![s]), WriteErrorKind::DuplicateOption);
    let mut s = Section::new("t", None);
    s.set("bad.name", "v");
    assert_eq!(bad(vec![s]), WriteErrorKind::InvalidOptionName);
    let e = Package {
        name: Some("a b".into()),
        sections: vec![],
    }
    .write()
    .unwrap_err();
    assert_eq!(e.kind, WriteErrorKind::InvalidPackageName);
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const NAME_CHARS: &[&str] = &["a", "b", "z", "_", "0", "9", "Q"];
const VALUE_PIECES: &[&str] = &[
    "a", "Z", "0", " ", "\t", "\n", "\r\n", "'", "\"", "\\", "#", ";", "é", "€", "x y", "''",
    "\\'", "$", "*", "-", "config", "option",
];
const TYPES: &[&str] = &[
    "rule", "route", "t-1", "a.b", "we'ird", "x#y", "q\"t", "b\\s", ";",
];

fn name(rng: &mut Rng) -> String {
    (0..1 + rng.below(6))
        .map(|_| rng.pick(NAME_CHARS))
        .collect()
}

fn value(rng: &mut Rng) -> String {
    (0..rng.below(8)).map(|_| rng.pick(VALUE_PIECES)).collect()
}

fn package(rng: &mut Rng) -> Package {
    let mut used = std::collections::HashSet::new();
    let sections = (0..rng.below(6))
        .map(|_| {
            let n = name(rng);
            let named = rng.below(3) > 0 && used.insert(n.clone());
            let mut s = Section::new(rng.pick(TYPES), named.then_some(n));
            for _ in 0..rng.below(6) {
                let o = name(rng);
                if rng.below(2) == 0 {
                    s.set(o, value(rng));
                } else {
                    s.set_list(o, (0..1 + rng.below(3)).map(|_| value(rng)).collect());
                }
            }
            s
        })
        .collect();
    let name = (rng.below(2) == 0).then(|| "agentd".to_string());
    Package { name, sections }
}

#[test]
fn generated_packages_round_trip_and_writing_is_idempotent() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..3000 {
        let pkg = package(&mut rng);
        let text = pkg
            .write()
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{pkg:?}"));
        let back = Package::parse(&text).unwrap_or_else(|e| panic!("case {case}: {e}\n{text}"));
        assert_eq!(back, pkg, "case {case}\n{text}");
        assert_eq!(
            back.write().unwrap(),
            text,
            "case {case}: writing is not idempotent"
        );
    }
}

/// Random statement soup: whatever parses must survive write → parse.
#[test]
fn generated_text_that_parses_round_trips() {
    const PIECES: &[&str] = &[
        "config", "option", "list", "package", "c", "o", "l", " ", "\t", "\n", "'", "\"", "\\",
        "#", ";", "rule", "main", "a", "b_1", "x y", "é", "''", "'\\''", "\r\n", "agentd",
    ];
    let mut rng = Rng(42);
    let mut parsed = 0;
    for case in 0..20_000 {
        let text: String = (0..rng.below(24)).map(|_| rng.pick(PIECES)).collect();
        let Ok(pkg) = Package::parse(&text) else {
            continue;
        };
        parsed += 1;
        let written = pkg
            .write()
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{text:?}"));
        let back =
            Package::parse(&written).unwrap_or_else(|e| panic!("case {case}: {e}\n{written}"));
        assert_eq!(back, pkg, "case {case}: {text:?}");
    }
    assert!(
        parsed > 1000,
        "generator too weak: only {parsed} inputs parsed"
    );
}
