//! The typed configuration of `/etc/config/agentd` and its entry points.

mod build;
mod error;
mod read;
mod schema_file;
mod types;
mod whole;
mod write;

use std::io::Read as _;
use std::path::Path;

pub use error::{ConfigError, ConfigErrorKind, ConfigErrors, Problem, Recovery, SectionRef};
pub use schema_file::{read_schema_file, SchemaFileError, MAX_SCHEMA_FILE_BYTES};
pub use types::*;

use crate::uci::{Package, Prefix, MAX_FILE_BYTES};

/// Everything in `/etc/config/agentd`, validated, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub agentd: Agentd,
    pub gateway: Gateway,
    pub arpx: Arpx,
    pub discovery: Discovery,
    pub peers: Vec<Peer>,
    pub tenants: Vec<Tenant>,
    pub agents: Vec<Agent>,
    pub rules: Vec<Rule>,
    pub routes: Vec<StaticRoute>,
    pub mappings: Vec<Mapping>,
    pub ipv6: Ipv6,
    pub relay: Relay,
    pub cloud: Cloud,
}

/// Default path of the configuration file.
pub const DEFAULT_PATH: &str = "/etc/config/agentd";

/// A configuration read from a file that may be partly invalid: what is
/// valid, and every problem with what was done about it.
///
/// The rules (DESIGN §9; a typo must never take the router down):
/// - a repeatable section (`rule`, `route`, `tenant`, `peer`, `mapping`)
///   with any error is skipped as a whole — half a rule or route means
///   something else than what was written;
/// - in a singleton section (`agentd`, `gateway`, ...) each wrong option
///   holds its default and the rest is used; cross-option checks run
///   again with the defaults, and a condition no default can cure puts
///   the whole section at its defaults; unknown options are ignored;
/// - an unknown section type and a second singleton are skipped;
/// - a syntax error stops reading there (as libuci does): what parsed
///   before it is used, a repeatable section it cut short is skipped, a
///   singleton it cut short keeps the options read before it;
/// - an unreadable or oversized file yields the defaults.
///
/// [`policy_problems`](Partial::policy_problems) says whether the policy
/// itself is affected, in which case the daemon must deny everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    pub config: Config,
    pub problems: Vec<Problem>,
    /// What a strict load reports (no follow-on errors of fallbacks).
    errors: Vec<ConfigError>,
    /// For [`Partial::whole_file`].
    shape: whole::Shape,
}

impl Partial {
    /// True if the file is completely valid.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    /// The errors of the file as written, as a strict load reports them.
    pub fn errors(&self) -> ConfigErrors {
        ConfigErrors(self.errors.clone())
    }

    /// The config if the file is completely valid.
    pub fn into_result(self) -> Result<Config, ConfigErrors> {
        if self.problems.is_empty() {
            Ok(self.config)
        } else {
            Err(ConfigErrors(self.errors))
        }
    }

    /// Problems that leave the policy unknown: a skipped `rule` section
    /// (or an unknown section type that looks like a misspelt `rule`), a
    /// wrong `agentd.default_action` or no `agentd` section at all (see
    /// [`Partial::whole_file`]), or a file not read to its end (rules
    /// may follow a syntax error). A daemon denies everything while any
    /// exists, since a lost `deny` rule must not turn into an allow.
    pub fn policy_problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| {
            let e = &p.error;
            let ty = e.section.as_ref().map(|s| s.ty.as_str());
            matches!(p.recovery, Recovery::FileIgnored | Recovery::RestIgnored)
                || ty == Some("rule")
                || (ty == Some("agentd") && e.option.as_deref() == Some("default_action"))
                || matches!(e.kind, ConfigErrorKind::NoMainSection { .. })
                || matches!(
                    e.kind,
                    ConfigErrorKind::UnknownSection {
                        suggestion: Some("rule")
                    }
                )
        })
    }
}

impl From<Config> for Partial {
    /// A valid config as a partial load without problems.
    fn from(config: Config) -> Partial {
        Partial {
            config,
            problems: Vec::new(),
            errors: Vec::new(),
            // A valid config stands for a whole file: it has its main
            // section (as its UCI text would).
            shape: whole::Shape {
                sections: 1,
                main: Some(SectionRef {
                    ty: "agentd".into(),
                    name: Some("main".into()),
                    index: 0,
                    label: None,
                }),
            },
        }
    }
}

impl Config {
    /// Parses and validates UCI text; `file` names the source in errors.
    pub fn from_str(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        Config::from_str_partial(text, file).into_result()
    }

    /// Reads what is valid in UCI text (see [`Partial`]).
    pub fn from_str_partial(text: &str, file: &str) -> Partial {
        partial(Package::parse_prefix(text), file)
    }

    /// Validates an already parsed package.
    pub fn from_package(pkg: &Package, file: &str) -> Result<Config, ConfigErrors> {
        Config::from_package_partial(pkg, file).into_result()
    }

    /// Reads what is valid in an already parsed package.
    pub fn from_package_partial(pkg: &Package, file: &str) -> Partial {
        let b = build::build(pkg, file, None);
        Partial {
            config: b.config,
            problems: b.problems,
            errors: b.errors,
            shape: b.shape,
        }
    }

    /// Reads, parses and validates a file (at most
    /// [`MAX_FILE_BYTES`](crate::uci::MAX_FILE_BYTES)).
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        Config::load_with_package(path).map(|(c, _)| c)
    }

    /// Reads what is valid in a file (see [`Partial`]); never fails: an
    /// unreadable file yields the defaults and says why.
    pub fn load_partial(path: &Path) -> Partial {
        let file = path.display().to_string();
        match read_bounded(path) {
            Ok(bytes) => partial(Package::parse_bytes_prefix(&bytes), &file),
            Err(error) => {
                let error = *error;
                let b = build::build(&Package::default(), &file, None);
                Partial {
                    config: b.config,
                    problems: vec![Problem {
                        error: error.clone(),
                        recovery: Recovery::FileIgnored,
                    }],
                    errors: vec![error],
                    shape: b.shape,
                }
            }
        }
    }

    /// Like [`load`](Config::load), also returning the raw package
    /// (sections in file order) for tools.
    pub fn load_with_package(path: &Path) -> Result<(Config, Package), ConfigErrors> {
        let pkg = load_package(path)?;
        let config = Config::from_package(&pkg, &path.display().to_string())?;
        Ok((config, pkg))
    }

    /// The configuration as a UCI package: singleton sections under their
    /// canonical names, only options that differ from their default.
    pub fn to_package(&self) -> Package {
        write::to_package(self)
    }

    /// The configuration as UCI text, checked by reading it back: fails if
    /// a value is invalid or cannot be expressed in UCI (e.g. an empty list
    /// where the default list is not empty).
    pub fn to_uci(&self) -> Result<String, ConfigErrors> {
        const FILE: &str = "<generated>";
        let text = self.to_package().write().map_err(|e| {
            ConfigErrors(vec![ConfigError::file_level(
                FILE,
                ConfigErrorKind::Unwritable(e),
            )])
        })?;
        let back = Config::from_str(&text, FILE)?;
        if back != *self {
            return Err(ConfigErrors(vec![ConfigError::file_level(
                FILE,
                ConfigErrorKind::Unrepresentable,
            )]));
        }
        Ok(text)
    }
}

impl Default for Config {
    /// What an empty file yields: every option at its schema default.
    fn default() -> Config {
        build::build(&Package::default(), "<defaults>", None).config
    }
}

impl Config {
    /// [`Config::default`], built once: what daemon code takes its
    /// defaults from (`Default` impls of runtime types), so no default is
    /// ever written twice.
    pub fn defaults() -> &'static Config {
        static DEFAULTS: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
        DEFAULTS.get_or_init(Config::default)
    }
}

/// Builds what is valid in a parsed prefix, the syntax error (if any)
/// first among the problems.
fn partial(prefix: Prefix, file: &str) -> Partial {
    let cut_line = prefix
        .cut
        .as_ref()
        .filter(|c| c.last_section_open)
        .map(|c| c.error.line);
    let b = build::build(&prefix.pkg, file, cut_line);
    let mut problems = Vec::new();
    let mut errors = Vec::new();
    if let Some(cut) = prefix.cut {
        let error = syntax(file, cut.error);
        let recovery = match error.kind {
            ConfigErrorKind::TooLarge { .. } => Recovery::FileIgnored,
            _ => Recovery::RestIgnored,
        };
        errors.push(error.clone());
        problems.push(Problem { error, recovery });
    }
    problems.extend(b.problems);
    errors.extend(b.errors);
    Partial {
        config: b.config,
        problems,
        errors,
        shape: b.shape,
    }
}

fn syntax(file: &str, e: crate::uci::ParseError) -> ConfigError {
    let kind = match e.kind {
        crate::uci::ParseErrorKind::FileTooLarge { size, max } => ConfigErrorKind::TooLarge {
            size: size as u64,
            max,
        },
        _ => ConfigErrorKind::Syntax(e),
    };
    ConfigError::file_level(file, kind)
}

/// Reads a file with the size limit enforced while reading (the file may
/// grow between `stat` and `read`).
fn read_bounded(path: &Path) -> Result<Vec<u8>, Box<ConfigError>> {
    let file = path.display().to_string();
    let io_err = |e: std::io::Error| {
        Box::new(ConfigError::file_level(
            &file,
            ConfigErrorKind::Io {
                kind: e.kind(),
                message: e.to_string(),
            },
        ))
    };
    let f = std::fs::File::open(path).map_err(io_err)?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() > MAX_FILE_BYTES {
        let size = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
        return Err(Box::new(ConfigError::file_level(
            &file,
            ConfigErrorKind::TooLarge {
                size,
                max: MAX_FILE_BYTES,
            },
        )));
    }
    Ok(bytes)
}

/// Reads and parses a UCI file (size limit enforced while reading).
pub fn load_package(path: &Path) -> Result<Package, ConfigErrors> {
    let file = path.display().to_string();
    let bytes = read_bounded(path).map_err(|e| ConfigErrors(vec![*e]))?;
    Package::parse_bytes(&bytes).map_err(|e| ConfigErrors(vec![syntax(&file, e)]))
}
