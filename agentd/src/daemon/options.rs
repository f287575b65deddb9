//! agentd's command line.
//!
//! `agentd [--config FILE | -c DIR] [-f] [--socket PATH] [--demo]`
//! `agentd --check-config FILE`
//! `agentd --version`

use std::path::PathBuf;

use crate::cli::args::{Arg, Parser, UsageError};

/// The UCI file OpenWrt keeps our configuration in.
pub const DEFAULT_CONFIG: &str = uci_schema::DEFAULT_PATH;

pub const USAGE: &str = "\
usage: agentd [--config FILE | -c DIR] [-f] [--socket PATH] [--demo]
       agentd --check-config FILE
       agentd --version

  --config FILE        UCI file to run on (default /etc/config/agentd)
  -c DIR               read DIR/agentd instead (like other OpenWrt daemons)
  -f                   stay in the foreground and log to stderr
  --socket PATH        IPC socket, overriding the config's ipc_socket
  --demo               run on the embedded demo config (also AGENTD_DEMO=1)
  --check-config FILE  validate FILE, print OK or every error, and exit
  --version            print the version and exit
";

/// Where the configuration comes from, which decides how a missing file is
/// treated: a file the operator named must exist; the default path may be
/// absent (fresh install) and then built-in defaults apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `/etc/config/agentd`, not named on the command line.
    Default,
    /// Named with `--config FILE` or `-c DIR` (as `DIR/agentd`).
    Explicit(PathBuf),
    /// The embedded demo configuration; reload re-reads it too.
    Demo,
}

impl ConfigSource {
    /// The file reload reads, if any.
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            ConfigSource::Default => Some(PathBuf::from(DEFAULT_CONFIG)),
            ConfigSource::Explicit(p) => Some(p.clone()),
            ConfigSource::Demo => None,
        }
    }

    /// Human name for status and logs.
    pub fn describe(&self) -> String {
        match self {
            ConfigSource::Demo => "<embedded demo config>".to_string(),
            other => other
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        }
    }
}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Run(RunOptions),
    CheckConfig(PathBuf),
    Help,
    Version,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    pub config: ConfigSource,
    pub foreground: bool,
    pub socket: Option<PathBuf>,
}

/// Parses agentd's arguments. `demo_env` is the value of `AGENTD_DEMO`
/// (passed in so tests need not touch the process environment).
pub fn parse(mut p: Parser, demo_env: Option<&str>) -> Result<Mode, UsageError> {
    let mut config: Option<(ConfigSource, &'static str)> = None;
    let mut foreground = false;
    let mut socket = None;
    let mut check = None;
    let mut version = false;
    let mut set_config = |new: ConfigSource, opt: &'static str| match &config {
        Some((_, prev)) if *prev != opt => Err(UsageError::Conflict(prev, opt)),
        _ => {
            config = Some((new, opt));
            Ok(())
        }
    };
    while let Some(arg) = p.next_arg()? {
        match arg {
            Arg::Long(l) if l == "config" => {
                set_config(ConfigSource::Explicit(p.value()?.into()), "--config")?
            }
            Arg::Short('c') => set_config(
                ConfigSource::Explicit(PathBuf::from(p.value()?).join("agentd")),
                "-c",
            )?,
            Arg::Long(l) if l == "demo" => set_config(ConfigSource::Demo, "--demo")?,
            Arg::Short('f') => foreground = true,
            Arg::Long(l) if l == "foreground" => foreground = true,
            Arg::Long(l) if l == "socket" => socket = Some(PathBuf::from(p.value()?)),
            Arg::Long(l) if l == "check-config" => check = Some(PathBuf::from(p.value()?)),
            Arg::Short('h') => return Ok(Mode::Help),
            Arg::Long(l) if l == "help" => return Ok(Mode::Help),
            Arg::Long(l) if l == "version" => version = true,
            other => return Err(other.unexpected()),
        }
    }
    if version {
        return Ok(Mode::Version);
    }
    if let Some(file) = check {
        return Ok(Mode::CheckConfig(file));
    }
    let config = match config {
        Some((c, _)) => c,
        None if matches!(demo_env, Some(v) if !v.is_empty() && v != "0") => ConfigSource::Demo,
        None => ConfigSource::Default,
    };
    Ok(Mode::Run(RunOptions {
        config,
        foreground,
        socket,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Mode, UsageError> {
        parse(Parser::new(args.iter().map(|s| s.to_string())), None)
    }

    #[test]
    fn version_is_asked_for_by_its_option() {
        assert_eq!(parse_args(&["--version"]), Ok(Mode::Version));
        assert_eq!(parse_args(&["-f", "--version"]), Ok(Mode::Version));
        assert!(parse_args(&["--version=1"]).is_err());
    }

    #[test]
    fn defaults_run_on_etc_config_in_background() {
        assert_eq!(
            parse_args(&[]),
            Ok(Mode::Run(RunOptions {
                config: ConfigSource::Default,
                foreground: false,
                socket: None
            }))
        );
    }

    #[test]
    fn dash_c_reads_the_agentd_file_inside_the_directory() {
        let Ok(Mode::Run(r)) = parse_args(&["-c", "/tmp/x", "-f"]) else {
            panic!("not run mode")
        };
        assert_eq!(r.config, ConfigSource::Explicit("/tmp/x/agentd".into()));
        assert!(r.foreground);
    }

    #[test]
    fn config_and_dir_conflict() {
        assert_eq!(
            parse_args(&["--config", "/a", "-c", "/b"]),
            Err(UsageError::Conflict("--config", "-c"))
        );
    }

    #[test]
    fn check_config_wins_over_run_options() {
        assert_eq!(
            parse_args(&["-f", "--check-config", "/x"]),
            Ok(Mode::CheckConfig("/x".into()))
        );
    }

    #[test]
    fn demo_env_selects_demo_only_without_explicit_config() {
        let p = |a: &[&str]| Parser::new(a.iter().map(|s| s.to_string()));
        let Ok(Mode::Run(r)) = parse(p(&[]), Some("1")) else {
            panic!()
        };
        assert_eq!(r.config, ConfigSource::Demo);
        let Ok(Mode::Run(r)) = parse(p(&["--config", "/a"]), Some("1")) else {
            panic!()
        };
        assert_eq!(r.config, ConfigSource::Explicit("/a".into()));
        let Ok(Mode::Run(r)) = parse(p(&[]), Some("0")) else {
            panic!()
        };
        assert_eq!(r.config, ConfigSource::Default);
    }

    #[test]
    fn unknown_options_are_usage_errors() {
        assert_eq!(
            parse_args(&["--bogus"]),
            Err(UsageError::UnknownOption("--bogus".into()))
        );
        assert_eq!(
            parse_args(&["extra"]),
            Err(UsageError::UnexpectedArgument("extra".into()))
        );
    }
}
