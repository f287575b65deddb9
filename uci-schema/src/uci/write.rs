//! UCI writer: [`Package`] → canonical text.
//!
//! The output is what `uci export` prints (tab-indented options, values in
//! single quotes, `'` written as `'\''`), so files we write diff cleanly
//! against files `uci commit` writes. Anything the parser would read back
//! differently — invalid names, empty lists, duplicate names, NUL bytes,
//! values over the limits — is refused, so `parse(write(p)) == p` holds for
//! every package `write` accepts.

use std::collections::HashSet;
use std::fmt::{self, Write as _};

use super::{
    is_valid_name, is_valid_package_name, is_valid_type, Package, Value, MAX_FILE_BYTES,
    MAX_LIST_ITEMS, MAX_OPTIONS_PER_SECTION, MAX_SECTIONS, MAX_VALUE_BYTES,
};

/// Why a package cannot be written; `section` is its position in
/// `Package::sections`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError {
    pub section: Option<usize>,
    pub option: Option<String>,
    pub kind: WriteErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteErrorKind {
    InvalidPackageName,
    InvalidType,
    InvalidSectionName,
    InvalidOptionName,
    DuplicateSectionName,
    DuplicateOption,
    EmptyList,
    NulInValue,
    ValueTooLong,
    TooManySections,
    TooManyOptions,
    TooManyListItems,
    TooLarge,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.section {
            write!(f, "section #{s}: ")?;
        }
        if let Some(o) = &self.option {
            write!(f, "option '{o}': ")?;
        }
        f.write_str(match self.kind {
            WriteErrorKind::InvalidPackageName => "invalid package name",
            WriteErrorKind::InvalidType => "invalid section type",
            WriteErrorKind::InvalidSectionName => "invalid section name",
            WriteErrorKind::InvalidOptionName => "invalid option name",
            WriteErrorKind::DuplicateSectionName => "section name used twice",
            WriteErrorKind::DuplicateOption => "option name used twice in one section",
            WriteErrorKind::EmptyList => "a list without items cannot be written",
            WriteErrorKind::NulInValue => "value contains a NUL byte",
            WriteErrorKind::ValueTooLong => "value longer than the parser accepts",
            WriteErrorKind::TooManySections => "more sections than the parser accepts",
            WriteErrorKind::TooManyOptions => "more options than the parser accepts",
            WriteErrorKind::TooManyListItems => "more list items than the parser accepts",
            WriteErrorKind::TooLarge => "output larger than the parser accepts",
        })
    }
}

impl std::error::Error for WriteError {}

pub(super) fn write(pkg: &Package) -> Result<String, WriteError> {
    let fail = |section, option: Option<&str>, kind| WriteError {
        section,
        option: option.map(str::to_string),
        kind,
    };
    let mut out = String::new();
    if let Some(name) = &pkg.name {
        if !is_valid_package_name(name) {
            return Err(fail(None, None, WriteErrorKind::InvalidPackageName));
        }
        let _ = writeln!(out, "package {name}");
    }
    if pkg.sections.len() > MAX_SECTIONS {
        return Err(fail(None, None, WriteErrorKind::TooManySections));
    }
    let mut names = HashSet::new();
    for (i, s) in pkg.sections.iter().enumerate() {
        if !is_valid_type(&s.ty) {
            return Err(fail(Some(i), None, WriteErrorKind::InvalidType));
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("config ");
        push_type(&mut out, &s.ty);
        if let Some(name) = &s.name {
            if !is_valid_name(name) {
                return Err(fail(Some(i), None, WriteErrorKind::InvalidSectionName));
            }
            if !names.insert(name.as_str()) {
                return Err(fail(Some(i), None, WriteErrorKind::DuplicateSectionName));
            }
            let _ = write!(out, " '{name}'");
        }
        out.push('\n');
        if s.options.len() > MAX_OPTIONS_PER_SECTION {
            return Err(fail(Some(i), None, WriteErrorKind::TooManyOptions));
        }
        let mut seen = HashSet::new();
        for o in &s.options {
            let name = o.name.as_str();
            if !is_valid_name(name) {
                return Err(fail(Some(i), Some(name), WriteErrorKind::InvalidOptionName));
            }
            if !seen.insert(name) {
                return Err(fail(Some(i), Some(name), WriteErrorKind::DuplicateOption));
            }
            let (keyword, items) = match &o.value {
                Value::Single(v) => ("option", std::slice::from_ref(v)),
                Value::List(items) if items.is_empty() => {
                    return Err(fail(Some(i), Some(name), WriteErrorKind::EmptyList))
                }
                Value::List(items) if items.len() > MAX_LIST_ITEMS => {
                    return Err(fail(Some(i), Some(name), WriteErrorKind::TooManyListItems))
                }
                Value::List(items) => ("list", items.as_slice()),
            };
            for v in items {
                if v.contains('\0') {
                    return Err(fail(Some(i), Some(name), WriteErrorKind::NulInValue));
                }
                if v.len() > MAX_VALUE_BYTES {
                    return Err(fail(Some(i), Some(name), WriteErrorKind::ValueTooLong));
                }
                let _ = write!(out, "\t{keyword} {name} ");
                push_quoted(&mut out, v);
                out.push('\n');
            }
        }
        if out.len() > MAX_FILE_BYTES {
            return Err(fail(Some(i), None, WriteErrorKind::TooLarge));
        }
    }
    Ok(out)
}

/// Single-quotes `v`; a `'` inside becomes `'\''` (close, escaped quote,
/// reopen), the only character single quotes cannot hold.
fn push_quoted(out: &mut String, v: &str) {
    out.push('\'');
    for (i, part) in v.split('\'').enumerate() {
        if i > 0 {
            out.push_str("'\\''");
        }
        out.push_str(part);
    }
    out.push('\'');
}

/// Section types are written bare, as `uci export` does, unless they hold
/// characters the lexer treats specially.
fn push_type(out: &mut String, ty: &str) {
    if ty
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        out.push_str(ty);
    } else {
        push_quoted(out, ty);
    }
}
