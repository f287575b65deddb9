//! The schema table is self-consistent: every default passes its own
//! checks, names are valid UCI and unique, and the typed widths fit.

use std::collections::HashSet;

use uci_schema::schema::{section_spec, DefaultValue, Kind, SECTIONS};
use uci_schema::uci::{is_valid_name, is_valid_type};

#[test]
fn every_default_passes_its_own_checks() {
    for s in SECTIONS {
        for o in s.options {
            match o.default {
                DefaultValue::Text(t) => {
                    assert!(!o.list, "{}.{}: list with a text default", s.ty, o.name);
                    assert!(
                        o.check(t),
                        "{}.{}: default {t:?} fails {}",
                        s.ty,
                        o.name,
                        o.kind
                    );
                }
                DefaultValue::Items(items) => {
                    assert!(
                        o.list,
                        "{}.{}: items default on a single option",
                        s.ty, o.name
                    );
                    for i in items {
                        assert!(o.check(i), "{}.{}: default item {i:?} fails", s.ty, o.name);
                    }
                }
                DefaultValue::SectionName => {
                    assert!(
                        s.many,
                        "{}.{}: singletons have no meaningful name",
                        s.ty, o.name
                    );
                    assert!(
                        matches!(o.kind, Kind::Name | Kind::RouteId),
                        "{}.{}",
                        s.ty,
                        o.name
                    );
                }
                DefaultValue::Required => {
                    assert!(s.many, "{}.{}: required in a singleton", s.ty, o.name)
                }
            }
            if let Kind::UInt { min, max } = o.kind {
                assert!(min <= max, "{}.{}", s.ty, o.name);
            }
            assert!(!o.doc.is_empty(), "{}.{} has no doc", s.ty, o.name);
        }
    }
}

#[test]
fn names_are_valid_uci_and_unique() {
    let mut types = HashSet::new();
    let mut singleton_names = HashSet::new();
    for s in SECTIONS {
        assert!(is_valid_type(s.ty) && types.insert(s.ty), "{}", s.ty);
        if !s.many {
            assert!(is_valid_name(s.canonical_name), "{}", s.ty);
            assert!(
                singleton_names.insert(s.canonical_name),
                "canonical name reused: {}",
                s.canonical_name
            );
        }
        let mut options = HashSet::new();
        for o in s.options {
            assert!(
                is_valid_name(o.name) && options.insert(o.name),
                "{}.{}",
                s.ty,
                o.name
            );
        }
    }
    assert_eq!(types.len(), 13);
}

#[test]
fn narrow_typed_fields_fit_their_ranges() {
    let max_of =
        |ty: &str, opt: &str| match section_spec(ty).and_then(|s| s.option(opt)).map(|o| o.kind) {
            Some(Kind::UInt { max, .. }) => max,
            k => panic!("{ty}.{opt}: {k:?}"),
        };
    for (ty, opt) in [
        ("rule", "priority"),
        ("route", "version"),
        ("mapping", "version"),
    ] {
        assert!(max_of(ty, opt) <= u64::from(u32::MAX), "{ty}.{opt}");
    }
    for (ty, opt) in [("peer", "port"), ("peer", "data_port")] {
        assert!(max_of(ty, opt) <= u64::from(u16::MAX), "{ty}.{opt}");
    }
}

#[test]
fn design_section_13_option_names_are_all_in_the_schema() {
    // The option names of DESIGN §13 are a contract; the example file
    // used by the validation tests carries every one of them.
    let pkg = uci_schema::uci::Package::parse(include_str!("design-example.conf")).unwrap();
    for s in &pkg.sections {
        let spec = section_spec(&s.ty).unwrap_or_else(|| panic!("section {}", s.ty));
        for o in &s.options {
            assert!(spec.option(&o.name).is_some(), "{}.{}", s.ty, o.name);
        }
    }
}
