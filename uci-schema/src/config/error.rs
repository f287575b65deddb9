//! Configuration errors: each names the file, the section and the option
//! and says what is wrong, and all of them are collected (fixing a config
//! one error per run is miserable).

use std::fmt;
use std::io;

use crate::schema::Kind;
use crate::uci::{ParseError, WriteError};

/// Every problem found in one configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// One problem, e.g. `/etc/config/agentd: rule '20-cheap' (section
/// 'prefer_cheap'): option 'priority': expected an integer 0..=65535, got
/// 'high'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// `None` for errors about the whole file (I/O, size, syntax).
    pub section: Option<SectionRef>,
    pub option: Option<String>,
    pub kind: ConfigErrorKind,
}

/// Which section an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionRef {
    pub ty: String,
    /// `None` for anonymous sections.
    pub name: Option<String>,
    /// Position among the sections of this type (`@ty[index]`).
    pub index: usize,
    /// The section's own identifier when it has one that differs from its
    /// UCI name (a rule's `id`, a tenant's `name`).
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io {
        kind: io::ErrorKind,
        message: String,
    },
    /// The file is larger than [`MAX_FILE_BYTES`](crate::uci::MAX_FILE_BYTES).
    TooLarge { size: u64, max: usize },
    /// The file is not valid UCI.
    Syntax(ParseError),
    /// A section type the schema does not know (typo?).
    UnknownSection { suggestion: Option<&'static str> },
    /// A second section of a type that may appear once.
    DuplicateSection { first: String },
    /// An option the section type does not have (typo?).
    UnknownOption { suggestion: Option<&'static str> },
    /// `list` lines for an option that takes one value.
    NotAList,
    /// A value the option does not accept.
    InvalidValue { expected: Kind, got: String },
    /// A required option is absent.
    Missing,
    /// An option required by another option's value is absent or empty.
    /// `trigger` is the option whose value requires it.
    RequiredWhen {
        condition: String,
        trigger: &'static str,
    },
    /// Two options must satisfy `lower <= upper`.
    Order {
        lower: &'static str,
        lower_value: u64,
        upper: &'static str,
        upper_value: u64,
    },
    /// An identifier that must be unique is used twice.
    Duplicate {
        what: &'static str,
        value: String,
        first: String,
    },
    /// A route's `tenant` differs from the tenant in its `origin`.
    TenantMismatch {
        tenant: String,
        origin_tenant: String,
    },
    /// Two options that say the same thing two ways are both set (the
    /// error names one, `other` is the second).
    Exclusive { other: &'static str },
    /// A `peer` section names this router's own `agentd.router_id`.
    OwnRouterId { router_id: String },
    /// A section a syntax error cut short: its options from the error on
    /// were never read.
    Incomplete { line: u32 },
    /// The file has no `agentd` section (`sections`: how many it has of
    /// any type, 0 for an empty file; `peers`: enabled peer sections).
    NoMainSection { sections: usize, peers: usize },
    /// `agentd.router_id` is empty while `peers` enabled peer sections
    /// exist (`first` names the first).
    RouterIdNeeded { peers: usize, first: String },
    /// Refused by the daemon that uses the section, for a reason the
    /// schema cannot see (e.g. a static route id too long once prefixed).
    Refused { reason: String },
    /// `Config::to_uci`: the package could not be written.
    Unwritable(WriteError),
    /// `Config::to_uci`: the written text reads back as a different config
    /// (a value UCI cannot express, such as an empty list whose default
    /// is not empty).
    Unrepresentable,
}

/// What a partial load ([`Config::load_partial`](crate::Config::load_partial))
/// did about one problem, so the running service can say exactly what it
/// is not using.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing in the file was usable (unreadable, too large): every
    /// section is absent or at its defaults.
    FileIgnored,
    /// A syntax error: nothing from there on was read (sections after it
    /// are absent or at their defaults).
    RestIgnored,
    /// The whole section was left out: a repeatable section (rule, route,
    /// tenant, peer, mapping) with any error, a second singleton section,
    /// or a section of an unknown type.
    SectionSkipped,
    /// A singleton section cut short by a syntax error: the options read
    /// before the error are used, the others hold their defaults.
    SectionPartial,
    /// An option of a singleton section holds its default instead.
    OptionDefault,
    /// An unknown option of a singleton section was ignored.
    OptionIgnored,
    /// An absent singleton section: every option of it at its default.
    SectionDefaults,
    /// The peer sections are kept, but no peer session starts.
    PeersIdle,
}

impl Recovery {
    /// Stable lowercase name for JSON (`agentctl status --json`).
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::FileIgnored => "file_ignored",
            Recovery::RestIgnored => "rest_ignored",
            Recovery::SectionSkipped => "section_skipped",
            Recovery::SectionPartial => "section_partial",
            Recovery::OptionDefault => "option_default",
            Recovery::OptionIgnored => "option_ignored",
            Recovery::SectionDefaults => "section_defaults",
            Recovery::PeersIdle => "peers_idle",
        }
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Recovery::FileIgnored => "file not used: every option at its default",
            Recovery::RestIgnored => "the rest of the file was not read",
            Recovery::SectionSkipped => "section skipped",
            Recovery::SectionPartial => "options after the error at their defaults",
            Recovery::OptionDefault => "option at its default",
            Recovery::OptionIgnored => "option ignored",
            Recovery::SectionDefaults => "every option of the section at its default",
            Recovery::PeersIdle => "no peer session starts",
        })
    }
}

/// One error of a partly invalid file and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub error: ConfigError,
    pub recovery: Recovery,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.error, self.recovery)
    }
}

impl ConfigError {
    pub(crate) fn file_level(file: &str, kind: ConfigErrorKind) -> ConfigError {
        ConfigError {
            file: file.to_string(),
            section: None,
            option: None,
            kind,
        }
    }
}

/// Shortens user text echoed in a message.
fn clip(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

impl fmt::Display for SectionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addr = match &self.name {
            Some(n) => format!("'{n}'"),
            None => format!("@{}[{}]", self.ty, self.index),
        };
        match &self.label {
            Some(l) if self.name.as_deref() != Some(l.as_str()) => {
                write!(f, "{} '{}' (section {addr})", self.ty, clip(l))
            }
            _ => write!(f, "{} {addr}", self.ty),
        }
    }
}

impl fmt::Display for ConfigErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ConfigErrorKind::*;
        match self {
            Io { message, .. } => write!(f, "cannot read: {message}"),
            TooLarge { size, max } => {
                write!(f, "file is {size} bytes, more than the limit of {max}")
            }
            Syntax(e) => write!(f, "{e}"),
            UnknownSection { suggestion } => {
                f.write_str("unknown section type")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean '{s}'?)")?;
                }
                Ok(())
            }
            DuplicateSection { first } => {
                write!(
                    f,
                    "only one section of this type is allowed, the first is {first}"
                )
            }
            UnknownOption { suggestion } => {
                f.write_str("unknown option")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean '{s}'?)")?;
                }
                Ok(())
            }
            NotAList => f.write_str("takes a single value ('option'), not a list"),
            InvalidValue { expected, got } => write!(f, "expected {expected}, got '{}'", clip(got)),
            Missing => f.write_str("required but missing"),
            RequiredWhen { condition, .. } => write!(f, "required when {condition}"),
            Incomplete { line } => write!(
                f,
                "cut short by the syntax error at line {line}: its later options were not read"
            ),
            Refused { reason } => f.write_str(reason),
            NoMainSection { sections: 0, .. } => f.write_str(
                "the file is empty: a router's configuration needs at least `config agentd 'main'` with its router_id",
            ),
            NoMainSection { peers, .. } => {
                f.write_str("no `config agentd 'main'` section: router_id, identity, leases and default_action are at their defaults")?;
                if *peers > 0 {
                    write!(
                        f,
                        ", and the {peers} enabled peer section(s) need a router_id"
                    )?;
                }
                Ok(())
            }
            RouterIdNeeded { peers, first } => write!(
                f,
                "required when peer sections are configured ({peers} enabled, the first {first}): without it no peer session starts"
            ),
            Order {
                lower,
                lower_value,
                upper,
                upper_value,
            } => write!(
                f,
                "{lower} ({lower_value}) must not be greater than {upper} ({upper_value})"
            ),
            Duplicate { what, value, first } => {
                write!(f, "{what} '{}' is already used by {first}", clip(value))
            }
            Exclusive { other } => write!(f, "set together with option '{other}'; set only one"),
            OwnRouterId { router_id } => write!(
                f,
                "router_id '{}' is this router's own agentd.router_id (a router does not peer with itself)",
                clip(router_id)
            ),
            Unwritable(e) => write!(f, "cannot be written as UCI: {e}"),
            Unrepresentable => {
                f.write_str("cannot be expressed in UCI without changing its meaning")
            }
            TenantMismatch {
                tenant,
                origin_tenant,
            } => write!(
                f,
                "tenant '{}' differs from the tenant '{}' of origin",
                clip(tenant),
                clip(origin_tenant)
            ),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(s) = &self.section {
            write!(f, "{s}: ")?;
        }
        if let Some(o) = &self.option {
            write!(f, "option '{o}': ")?;
        }
        write!(f, "{}", self.kind)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
impl std::error::Error for ConfigErrors {}

/// The closest of `candidates` to `word` if it is a likely typo (edit
/// distance at most 2, and less than the word's length).
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|&(d, _)| d <= 2 && d < word.len())
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance (names are short ASCII; inputs are capped).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() > 64 || b.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_catch_typos_only() {
        let names = ["priority", "action", "tenant"];
        assert_eq!(suggest("priorty", names), Some("priority"));
        assert_eq!(suggest("tennant", names), Some("tenant"));
        assert_eq!(suggest("bandwidth", names), None);
    }

    #[test]
    fn section_ref_shows_label_and_address() {
        let r = SectionRef {
            ty: "rule".into(),
            name: Some("prefer_cheap".into()),
            index: 1,
            label: Some("20-cheap".into()),
        };
        assert_eq!(r.to_string(), "rule '20-cheap' (section 'prefer_cheap')");
        let anon = SectionRef {
            ty: "route".into(),
            name: None,
            index: 2,
            label: None,
        };
        assert_eq!(anon.to_string(), "route @route[2]");
        let same = SectionRef {
            ty: "tenant".into(),
            name: Some("lab".into()),
            index: 0,
            label: Some("lab".into()),
        };
        assert_eq!(same.to_string(), "tenant 'lab'");
    }
}
