//! The typed configuration of `/etc/config/agentd` and its entry points.

mod build;
mod error;
mod read;
mod types;
mod write;

use std::io::Read as _;
use std::path::Path;

pub use error::{ConfigError, ConfigErrorKind, ConfigErrors, SectionRef};
pub use types::*;

use crate::uci::{Package, MAX_FILE_BYTES};

/// Everything in `/etc/config/agentd`, validated, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub agentd: Agentd,
    pub gateway: Gateway,
    pub arpx: Arpx,
    pub discovery: Discovery,
    pub peers: Vec<Peer>,
    pub tenants: Vec<Tenant>,
    pub rules: Vec<Rule>,
    pub routes: Vec<StaticRoute>,
    pub mappings: Vec<Mapping>,
    pub ipv6: Ipv6,
    pub relay: Relay,
    pub cloud: Cloud,
}

/// Default path of the configuration file.
pub const DEFAULT_PATH: &str = "/etc/config/agentd";

impl Config {
    /// Parses and validates UCI text; `file` names the source in errors.
    pub fn from_str(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        let pkg = Package::parse(text).map_err(|e| syntax(file, e))?;
        Config::from_package(&pkg, file)
    }

    /// Validates an already parsed package.
    pub fn from_package(pkg: &Package, file: &str) -> Result<Config, ConfigErrors> {
        let (config, errors) = build::build(pkg, file);
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Reads, parses and validates a file (at most
    /// [`MAX_FILE_BYTES`](crate::uci::MAX_FILE_BYTES)).
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        Config::load_with_package(path).map(|(c, _)| c)
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
        build::build(&Package::default(), "<defaults>").0
    }
}

fn syntax(file: &str, e: crate::uci::ParseError) -> ConfigErrors {
    let kind = match e.kind {
        crate::uci::ParseErrorKind::FileTooLarge { size, max } => ConfigErrorKind::TooLarge {
            size: size as u64,
            max,
        },
        _ => ConfigErrorKind::Syntax(e),
    };
    ConfigErrors(vec![ConfigError::file_level(file, kind)])
}

/// Reads and parses a UCI file with the size limit enforced while reading
/// (the file may grow between `stat` and `read`).
pub fn load_package(path: &Path) -> Result<Package, ConfigErrors> {
    let file = path.display().to_string();
    let io_err = |e: std::io::Error| {
        ConfigErrors(vec![ConfigError::file_level(
            &file,
            ConfigErrorKind::Io {
                kind: e.kind(),
                message: e.to_string(),
            },
        )])
    };
    let f = std::fs::File::open(path).map_err(io_err)?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() > MAX_FILE_BYTES {
        let size = std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len());
        return Err(ConfigErrors(vec![ConfigError::file_level(
            &file,
            ConfigErrorKind::TooLarge {
                size,
                max: MAX_FILE_BYTES,
            },
        )]));
    }
    Package::parse_bytes(&bytes).map_err(|e| syntax(&file, e))
}
