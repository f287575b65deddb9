//! Reading one raw UCI section through the schema table: generic checks
//! (unknown options, list vs single, value kinds, required options) happen
//! once when the reader is made; the typed getters then only convert, and
//! fall back to the table default for absent or invalid options (an
//! invalid option has already been reported; the fallback lets checking
//! continue to collect errors).
//!
//! An option set to `''` reads as absent, as libuci reads it (libuci does
//! not store it, see [`crate::schema::OFF`]): it takes its default, so
//! the daemons, `uci`, rpcd and LuCI agree on what the file means.
//!
//! A partial load reads a singleton section again with the options found
//! wrong *masked*: they read as absent (their default) but, unlike invalid
//! ones, still take part in cross-option checks, so the defaults they fall
//! back to are checked against the rest of the section.

use super::error::{suggest, ConfigError, ConfigErrorKind, SectionRef};
use crate::enums::UciEnum;
use crate::schema::{parse_bool, parse_uint, DefaultValue, Kind, OptionSpec, SectionSpec};
use crate::uci::{Section, Value};

pub(crate) struct Reader<'a> {
    spec: &'static SectionSpec,
    section: Option<&'a Section>,
    /// `None` when reading pure defaults (an absent singleton section).
    at: Option<SectionRef>,
    file: &'a str,
    errors: &'a mut Vec<ConfigError>,
    /// Options already reported as wrong.
    bad: Vec<&'static str>,
    /// Options the typed builder has read (checked against the table).
    read: Vec<&'static str>,
    /// Options read as absent whatever the section says.
    masked: &'a [&'static str],
}

/// Stand-in returned for a name missing from the table; only reachable
/// through a programming error, which `finish` reports in debug builds.
static UNKNOWN: OptionSpec = OptionSpec {
    name: "",
    kind: Kind::Text,
    list: false,
    default: DefaultValue::Text(""),
    empty: None,
    doc: "",
};

impl<'a> Reader<'a> {
    pub(crate) fn new(
        spec: &'static SectionSpec,
        section: Option<&'a Section>,
        index: usize,
        file: &'a str,
        errors: &'a mut Vec<ConfigError>,
        masked: &'a [&'static str],
    ) -> Reader<'a> {
        let at = section.map(|s| SectionRef {
            ty: s.ty.clone(),
            name: s.name.clone(),
            index,
            label: label_of(spec, s),
        });
        let mut r = Reader {
            spec,
            section,
            at,
            file,
            errors,
            bad: Vec::new(),
            read: Vec::new(),
            masked,
        };
        r.validate();
        r
    }

    /// Where errors of this section point.
    pub(crate) fn at(&self) -> Option<&SectionRef> {
        self.at.as_ref()
    }

    /// Where this section is; a placeholder `@type[0]` when reading pure
    /// defaults.
    pub(crate) fn section_ref(&self) -> SectionRef {
        self.at.clone().unwrap_or_else(|| SectionRef {
            ty: self.spec.ty.to_string(),
            name: None,
            index: 0,
            label: None,
        })
    }

    pub(crate) fn error(&mut self, option: Option<&str>, kind: ConfigErrorKind) {
        self.errors.push(ConfigError {
            file: self.file.to_string(),
            section: self.at.clone(),
            option: option.map(str::to_string),
            kind,
        });
    }

    fn validate(&mut self) {
        let Some(section) = self.section else { return };
        for o in &section.options {
            if self.masked.contains(&o.name.as_str()) || stored(&o.value).is_none() {
                continue;
            }
            let Some(os) = self.spec.option(&o.name) else {
                let suggestion = suggest(&o.name, self.spec.options.iter().map(|s| s.name));
                self.error(Some(&o.name), ConfigErrorKind::UnknownOption { suggestion });
                continue;
            };
            if matches!(o.value, Value::List(_)) && !os.list {
                self.error(Some(os.name), ConfigErrorKind::NotAList);
                self.bad.push(os.name);
                continue;
            }
            for item in o.value.items() {
                if !os.check(item) {
                    let kind = ConfigErrorKind::InvalidValue {
                        expected: os.kind,
                        got: item.clone(),
                    };
                    self.error(Some(os.name), kind);
                    if !self.bad.contains(&os.name) {
                        self.bad.push(os.name);
                    }
                }
            }
        }
        for os in self.spec.options {
            let missing = (section.get(os.name).and_then(stored).is_none()
                || self.masked.contains(&os.name))
                && match os.default {
                    DefaultValue::Required => true,
                    DefaultValue::SectionName => section.name.is_none(),
                    _ => false,
                };
            if missing {
                self.error(Some(os.name), ConfigErrorKind::Missing);
                self.bad.push(os.name);
            }
        }
    }

    fn spec_of(&mut self, name: &'static str) -> &'static OptionSpec {
        self.read.push(name);
        self.spec.option(name).unwrap_or(&UNKNOWN)
    }

    /// True if `name` is present (and, like every read value, valid).
    pub(crate) fn present(&self, name: &'static str) -> bool {
        self.value(name).is_some()
    }

    /// True unless `name` was reported as wrong.
    pub(crate) fn ok(&self, name: &'static str) -> bool {
        !self.bad.contains(&name)
    }

    fn value(&self, name: &'static str) -> Option<&'a Value> {
        if self.ok(name) && !self.masked.contains(&name) {
            self.section.and_then(|s| s.get(name)).and_then(stored)
        } else {
            None
        }
    }

    pub(crate) fn text(&mut self, name: &'static str) -> String {
        let os = self.spec_of(name);
        match self.value(name) {
            Some(v) => {
                let v = v.items().first().cloned().unwrap_or_default();
                if os.means_empty(&v) {
                    String::new()
                } else {
                    v
                }
            }
            None => match os.default {
                DefaultValue::Text(t) => t.to_string(),
                DefaultValue::SectionName => self
                    .section
                    .and_then(|s| s.name.clone())
                    .unwrap_or_default(),
                DefaultValue::Required | DefaultValue::Items(_) => String::new(),
            },
        }
    }

    pub(crate) fn u64(&mut self, name: &'static str) -> u64 {
        parse_uint(&self.text(name)).unwrap_or(0)
    }

    /// Table ranges of u32 options fit; the fallback is never used.
    pub(crate) fn u32(&mut self, name: &'static str) -> u32 {
        u32::try_from(self.u64(name)).unwrap_or(u32::MAX)
    }

    pub(crate) fn u16(&mut self, name: &'static str) -> u16 {
        u16::try_from(self.u64(name)).unwrap_or(u16::MAX)
    }

    pub(crate) fn bool(&mut self, name: &'static str) -> bool {
        parse_bool(&self.text(name)).unwrap_or(false)
    }

    pub(crate) fn choice<T: UciEnum>(&mut self, name: &'static str) -> T {
        T::from_name(&self.text(name)).unwrap_or(T::ALL[0])
    }

    /// An enum whose option accepts `''` for "none".
    pub(crate) fn maybe<T: UciEnum>(&mut self, name: &'static str) -> Option<T> {
        T::from_name(&self.text(name))
    }

    pub(crate) fn list(&mut self, name: &'static str) -> Vec<String> {
        let os = self.spec_of(name);
        match self.value(name) {
            Some(v) => v.items().to_vec(),
            None => match os.default {
                DefaultValue::Items(items) => items.iter().map(|s| s.to_string()).collect(),
                _ => Vec::new(),
            },
        }
    }

    pub(crate) fn choices<T: UciEnum>(&mut self, name: &'static str) -> Vec<T> {
        self.list(name)
            .iter()
            .filter_map(|s| T::from_name(s))
            .collect()
    }

    /// Reports `lower > upper` for two valid numeric options.
    pub(crate) fn order(
        &mut self,
        lower: &'static str,
        lower_value: u64,
        upper: &'static str,
        upper_value: u64,
    ) {
        if self.ok(lower) && self.ok(upper) && lower_value > upper_value {
            let culprit = if self.present(upper) { upper } else { lower };
            self.error(
                Some(culprit),
                ConfigErrorKind::Order {
                    lower,
                    lower_value,
                    upper,
                    upper_value,
                },
            );
        }
    }

    /// Checks that the builder read exactly the options of the table.
    pub(crate) fn finish(self) {
        debug_assert!(
            self.spec
                .options
                .iter()
                .all(|o| self.read.contains(&o.name))
                && self.read.iter().all(|n| self.spec.option(n).is_some()),
            "typed builder of '{}' and the schema table disagree",
            self.spec.ty
        );
    }
}

/// A section's own identifier (`id`/`name` option) for messages.
fn label_of(spec: &SectionSpec, s: &Section) -> Option<String> {
    let os = spec
        .options
        .iter()
        .find(|o| o.default == DefaultValue::SectionName)?;
    match s.get(os.name) {
        Some(Value::Single(v)) if os.check(v) => Some(v.clone()),
        _ => s.name.clone(),
    }
}

/// The value as libuci stores it: `option NAME ''` is not stored
/// (libuci's `uci_set()` returns without storing an empty value).
fn stored(v: &Value) -> Option<&Value> {
    match v {
        Value::Single(s) if s.is_empty() => None,
        v => Some(v),
    }
}
