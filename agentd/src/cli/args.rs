//! A small command-line tokenizer shared by `agentd` and `agentctl`.
//!
//! Hand-written instead of clap to keep the router binaries small; it
//! understands exactly what our two commands need: `--long VALUE`,
//! `--long=VALUE`, `-x VALUE`, flags, positionals and `--`.

use std::collections::VecDeque;
use std::fmt;

/// Why a command line was refused. Rendered as one line for stderr; the
/// binaries exit with status 2 on any of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// An option that needs a value came last or was followed by nothing.
    MissingValue(String),
    /// An option no command knows.
    UnknownOption(String),
    /// A positional argument where none was expected.
    UnexpectedArgument(String),
    /// `--flag=value` for an option that takes no value.
    UnexpectedValue(String),
    /// A value that does not parse as the option's type.
    BadValue {
        option: String,
        value: String,
        reason: &'static str,
    },
    /// A command needs an argument it did not get.
    Missing(&'static str),
    /// Two options that cannot be combined.
    Conflict(&'static str, &'static str),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::MissingValue(o) => write!(f, "option {o} needs a value"),
            UsageError::UnknownOption(o) => write!(f, "unknown option {o}"),
            UsageError::UnexpectedArgument(a) => write!(f, "unexpected argument {a:?}"),
            UsageError::UnexpectedValue(o) => write!(f, "option {o} takes no value"),
            UsageError::BadValue {
                option,
                value,
                reason,
            } => {
                write!(f, "invalid value {value:?} for {option}: {reason}")
            }
            UsageError::Missing(what) => write!(f, "missing {what}"),
            UsageError::Conflict(a, b) => write!(f, "{a} and {b} cannot be used together"),
        }
    }
}

impl std::error::Error for UsageError {}

/// One token of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `-x` (the dash is stripped).
    Short(char),
    /// `--name` (the dashes are stripped; a `=value` part is held back for
    /// [`Parser::value`]).
    Long(String),
    /// Anything else, and everything after `--`.
    Positional(String),
}

impl Arg {
    /// The option as the user typed it, for error messages.
    pub fn display(&self) -> String {
        match self {
            Arg::Short(c) => format!("-{c}"),
            Arg::Long(l) => format!("--{l}"),
            Arg::Positional(p) => p.clone(),
        }
    }

    /// Turns an option nobody handled into the matching usage error.
    pub fn unexpected(self) -> UsageError {
        match self {
            Arg::Positional(p) => UsageError::UnexpectedArgument(p),
            other => UsageError::UnknownOption(other.display()),
        }
    }
}

/// Pull-style tokenizer: call [`Parser::next`] for the next token and
/// [`Parser::value`] right after an option that takes a value.
#[derive(Debug)]
pub struct Parser {
    rest: VecDeque<String>,
    /// Value glued to the last long option with `=`.
    glued: Option<String>,
    /// Name of the last option, for "needs a value" errors.
    last: String,
    only_positionals: bool,
}

impl Parser {
    /// `args` excludes the program name.
    pub fn new<I: IntoIterator<Item = String>>(args: I) -> Parser {
        Parser {
            rest: args.into_iter().collect(),
            glued: None,
            last: String::new(),
            only_positionals: false,
        }
    }

    /// Parser over the process arguments (without argv\[0\]).
    pub fn from_env() -> Parser {
        Parser::new(std::env::args().skip(1))
    }

    pub fn next_arg(&mut self) -> Result<Option<Arg>, UsageError> {
        if let Some(v) = self.glued.take() {
            return Err(UsageError::UnexpectedValue(format!("{}={v}", self.last)));
        }
        let Some(tok) = self.rest.pop_front() else {
            return Ok(None);
        };
        if self.only_positionals {
            return Ok(Some(Arg::Positional(tok)));
        }
        if tok == "--" {
            self.only_positionals = true;
            return self.next_arg();
        }
        if let Some(long) = tok.strip_prefix("--") {
            let (name, glued) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            self.last = format!("--{name}");
            self.glued = glued;
            return Ok(Some(Arg::Long(name.to_string())));
        }
        let mut chars = tok.chars();
        if let (Some('-'), Some(c), None) = (chars.next(), chars.next(), chars.next()) {
            self.last = format!("-{c}");
            return Ok(Some(Arg::Short(c)));
        }
        Ok(Some(Arg::Positional(tok)))
    }

    /// The value of the option just returned by [`Parser::next`].
    pub fn value(&mut self) -> Result<String, UsageError> {
        if let Some(v) = self.glued.take() {
            return Ok(v);
        }
        match self.rest.pop_front() {
            Some(v) if !self.only_positionals => Ok(v),
            _ => Err(UsageError::MissingValue(self.last.clone())),
        }
    }

    /// The value of the option just returned, parsed as a number.
    pub fn number<T: std::str::FromStr>(&mut self) -> Result<T, UsageError> {
        let v = self.value()?;
        v.parse().map_err(|_| UsageError::BadValue {
            option: self.last.clone(),
            value: v,
            reason: "not a number",
        })
    }

    /// Whether every argument has been consumed (a value glued to the
    /// last option counts as one left).
    pub fn at_end(&self) -> bool {
        self.glued.is_none() && self.rest.is_empty()
    }

    /// Everything not consumed yet, as positionals.
    pub fn remaining(&mut self) -> Vec<String> {
        self.glued = None;
        self.rest.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Parser {
        Parser::new(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn long_options_take_values_separately_or_glued() {
        let mut a = p(&["--socket", "/s", "--config=/c", "status"]);
        assert_eq!(a.next_arg(), Ok(Some(Arg::Long("socket".into()))));
        assert_eq!(a.value(), Ok("/s".into()));
        assert_eq!(a.next_arg(), Ok(Some(Arg::Long("config".into()))));
        assert_eq!(a.value(), Ok("/c".into()));
        assert_eq!(a.next_arg(), Ok(Some(Arg::Positional("status".into()))));
        assert_eq!(a.next_arg(), Ok(None));
    }

    #[test]
    fn glued_value_on_a_flag_is_refused() {
        let mut a = p(&["--json=yes"]);
        assert_eq!(a.next_arg(), Ok(Some(Arg::Long("json".into()))));
        assert_eq!(
            a.next_arg(),
            Err(UsageError::UnexpectedValue("--json=yes".into()))
        );
    }

    #[test]
    fn missing_value_names_the_option() {
        let mut a = p(&["-c"]);
        assert_eq!(a.next_arg(), Ok(Some(Arg::Short('c'))));
        assert_eq!(a.value(), Err(UsageError::MissingValue("-c".into())));
    }

    #[test]
    fn double_dash_ends_options() {
        let mut a = p(&["--", "--json", "-f"]);
        assert_eq!(a.next_arg(), Ok(Some(Arg::Positional("--json".into()))));
        assert_eq!(a.next_arg(), Ok(Some(Arg::Positional("-f".into()))));
    }

    #[test]
    fn numbers_are_checked() {
        let mut a = p(&["--version", "x2"]);
        a.next_arg().unwrap();
        assert!(matches!(
            a.number::<u32>(),
            Err(UsageError::BadValue { .. })
        ));
    }
}
