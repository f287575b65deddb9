//! The UCI text format: the data model of one package file, its parser and
//! its writer.
//!
//! The grammar follows libuci's `file.c` (what `uci` on the router reads),
//! including its less obvious corners: abbreviated keywords (`c`, `o`, `l`,
//! `p`), `;` between statements, `#` ending an unquoted word, backslash
//! escapes outside single quotes, backslash-newline continuation, quoted
//! values spanning lines, and section names that are unique across *all*
//! section types of a package. Everything is bounded (see the `MAX_*`
//! constants) because the file is untrusted input to a root daemon.

mod parse;
mod write;

use std::fmt;

pub use parse::{Cut, ParseError, ParseErrorKind, Prefix};
pub use write::{WriteError, WriteErrorKind};

/// Largest accepted file. `/etc/config/agentd` with thousands of static
/// routes stays far below this; anything bigger is a mistake or an attack.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Largest accepted single value (option value or list item). Big enough
/// for an MCP `input_schema` JSON document.
pub const MAX_VALUE_BYTES: usize = 8 * 1024;
/// Longest accepted name (package, section type, section name, option name).
pub const MAX_NAME_BYTES: usize = 128;
/// Longest accepted physical line. The writer escapes `'` as `'\''` (four
/// bytes), so this leaves room for a maximal value made only of quotes:
/// everything the writer produces parses again.
pub const MAX_LINE_BYTES: usize = 4 * MAX_VALUE_BYTES + 2 * MAX_NAME_BYTES + 64;
/// Most sections in one package.
pub const MAX_SECTIONS: usize = 8192;
/// Most distinct options in one section.
pub const MAX_OPTIONS_PER_SECTION: usize = 256;
/// Most items in one list option.
pub const MAX_LIST_ITEMS: usize = 1024;

/// One parsed UCI file: the optional `package` line and the sections in
/// file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Package {
    /// Name from a `package NAME` line, if the file has one.
    pub name: Option<String>,
    pub sections: Vec<Section>,
}

/// One `config TYPE ['NAME']` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub ty: String,
    /// `None` for an anonymous section (addressed as `@type[idx]`).
    pub name: Option<String>,
    /// Options in first-definition order; names are unique.
    pub options: Vec<UciOption>,
}

/// One option of a section: `option NAME VALUE` or one or more
/// `list NAME VALUE` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciOption {
    pub name: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Single(String),
    List(Vec<String>),
}

impl Package {
    /// Parses UCI text. See the module docs for the grammar and limits.
    pub fn parse(text: &str) -> Result<Package, ParseError> {
        parse::parse(text)
    }

    /// Parses raw bytes, rejecting invalid UTF-8 with its position.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Package, ParseError> {
        parse::parse_bytes(bytes)
    }

    /// Parses UCI text up to its first syntax error: the statements
    /// before it are kept (see [`Prefix`]), nothing after it is read.
    pub fn parse_prefix(text: &str) -> Prefix {
        parse::parse_prefix(text)
    }

    /// [`parse_prefix`](Package::parse_prefix) on raw bytes: invalid UTF-8
    /// cuts the input at the start of the line holding the bad byte.
    pub fn parse_bytes_prefix(bytes: &[u8]) -> Prefix {
        parse::parse_bytes_prefix(bytes)
    }

    /// Writes canonical UCI text (what `uci export` prints: tab-indented,
    /// values single-quoted with `'\''` for embedded quotes). Fails only
    /// for names or values that UCI cannot represent.
    pub fn write(&self) -> Result<String, WriteError> {
        write::write(self)
    }

    /// The section named `name` (names are unique within a package).
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.name.as_deref() == Some(name))
    }

    /// Sections of type `ty`, in file order.
    pub fn sections_of<'a>(&'a self, ty: &'a str) -> impl Iterator<Item = &'a Section> + 'a {
        self.sections.iter().filter(move |s| s.ty == ty)
    }

    /// How section number `pos` (index into `sections`) is addressed:
    /// its name, or `@type[idx]` counting all sections of that type, as
    /// `uci` does.
    pub fn address(&self, pos: usize) -> Option<SectionAddress> {
        let s = self.sections.get(pos)?;
        let index = self.sections[..pos].iter().filter(|o| o.ty == s.ty).count();
        Some(SectionAddress {
            ty: s.ty.clone(),
            name: s.name.clone(),
            index,
        })
    }
}

impl Section {
    pub fn new(ty: impl Into<String>, name: Option<String>) -> Section {
        Section {
            ty: ty.into(),
            name,
            options: Vec::new(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.options
            .iter()
            .find(|o| o.name == name)
            .map(|o| &o.value)
    }

    /// Sets `option NAME VALUE`, replacing any earlier value in place (as
    /// `uci set` does).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.put(name.into(), Value::Single(value.into()));
    }

    /// Sets a list option to `items`, replacing any earlier value in place.
    pub fn set_list(&mut self, name: impl Into<String>, items: Vec<String>) {
        self.put(name.into(), Value::List(items));
    }

    fn put(&mut self, name: String, value: Value) {
        match self.options.iter_mut().find(|o| o.name == name) {
            Some(o) => o.value = value,
            None => self.options.push(UciOption { name, value }),
        }
    }
}

impl Value {
    /// All items: one for a single value, every item for a list.
    pub fn items(&self) -> &[String] {
        match self {
            Value::Single(s) => std::slice::from_ref(s),
            Value::List(v) => v,
        }
    }
}

/// How a section is addressed in messages: `'name'` or `@type[idx]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SectionAddress {
    pub ty: String,
    pub name: Option<String>,
    /// Position among all sections of the same type (0-based).
    pub index: usize,
}

impl fmt::Display for SectionAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "'{n}'"),
            None => write!(f, "@{}[{}]", self.ty, self.index),
        }
    }
}

/// Valid section and option names: `[A-Za-z0-9_]+` (libuci
/// `uci_validate_name`).
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Valid package names: `[A-Za-z0-9_-]+`.
pub fn is_valid_package_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Valid section types: printable ASCII without space (libuci
/// `uci_validate_type`).
pub fn is_valid_type(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_BYTES && s.bytes().all(|b| (33..=126).contains(&b))
}
