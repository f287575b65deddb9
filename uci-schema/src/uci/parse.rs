//! UCI parser: text → [`Package`].
//!
//! A byte-level lexer (every syntax character is ASCII, so slicing at them
//! keeps UTF-8 intact) turns the input into statements of words; each
//! statement is then applied to the package under construction. Positions
//! are 1-based lines and character columns of the physical file.

use std::collections::HashMap;
use std::fmt;

use super::{
    is_valid_name, is_valid_package_name, is_valid_type, Package, Section, UciOption, Value,
    MAX_FILE_BYTES, MAX_LINE_BYTES, MAX_LIST_ITEMS, MAX_OPTIONS_PER_SECTION, MAX_SECTIONS,
    MAX_VALUE_BYTES,
};

/// Why a UCI text was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line; 0 when the error concerns the whole input.
    pub line: u32,
    /// 1-based character column; 0 when the error concerns the whole input.
    pub column: u32,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    FileTooLarge {
        size: usize,
        max: usize,
    },
    InvalidUtf8,
    NulByte,
    LineTooLong {
        max: usize,
    },
    UnterminatedQuote {
        quote: char,
    },
    UnknownCommand(String),
    MissingArgument {
        command: &'static str,
        what: &'static str,
    },
    TooManyArguments {
        command: &'static str,
    },
    InvalidName {
        what: &'static str,
        name: String,
    },
    OptionOutsideSection,
    MisplacedPackage,
    DuplicateSection {
        name: String,
        first_line: u32,
    },
    TooManySections {
        max: usize,
    },
    TooManyOptions {
        max: usize,
    },
    TooManyListItems {
        max: usize,
    },
    ValueTooLong {
        max: usize,
    },
}

/// Shortens user text quoted inside an error message.
fn clip(s: &str) -> String {
    const MAX: usize = 48;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ParseErrorKind::*;
        match self {
            FileTooLarge { size, max } => {
                write!(f, "file is {size} bytes, more than the limit of {max}")
            }
            InvalidUtf8 => f.write_str("invalid UTF-8"),
            NulByte => f.write_str("NUL byte"),
            LineTooLong { max } => write!(f, "line longer than {max} bytes"),
            UnterminatedQuote { quote } => write!(f, "unterminated {quote} quote (opened here)"),
            UnknownCommand(w) => write!(
                f,
                "unknown command {:?} (expected package, config, option or list)",
                clip(w)
            ),
            MissingArgument { command, what } => write!(f, "'{command}' needs {what}"),
            TooManyArguments { command } => write!(f, "too many arguments for '{command}'"),
            InvalidName { what, name } => write!(
                f,
                "invalid {what} {:?} ({})",
                clip(name),
                match *what {
                    "section type" => "printable ASCII without spaces",
                    "package name" => "letters, digits, '_' and '-'",
                    _ => "letters, digits and '_'",
                }
            ),
            OptionOutsideSection => f.write_str("option or list before the first 'config' line"),
            MisplacedPackage => {
                f.write_str("'package' must come once, before the first 'config' line")
            }
            DuplicateSection { name, first_line } => write!(
                f,
                "section name '{}' already used at line {first_line} (names are unique in a package)",
                clip(name)
            ),
            TooManySections { max } => write!(f, "more than {max} sections"),
            TooManyOptions { max } => write!(f, "more than {max} options in one section"),
            TooManyListItems { max } => write!(f, "more than {max} items in one list"),
            ValueTooLong { max } => write!(f, "value longer than {max} bytes"),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.kind)
        } else {
            write!(
                f,
                "line {}, column {}: {}",
                self.line, self.column, self.kind
            )
        }
    }
}

impl std::error::Error for ParseError {}

pub(super) fn parse_bytes(bytes: &[u8]) -> Result<Package, ParseError> {
    strict(parse_bytes_prefix(bytes))
}

pub(super) fn parse(text: &str) -> Result<Package, ParseError> {
    strict(parse_prefix(text))
}

fn strict(p: Prefix) -> Result<Package, ParseError> {
    match p.cut {
        None => Ok(p.pkg),
        Some(cut) => Err(cut.error),
    }
}

/// What parses before the first syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    /// Every statement before the error, applied. Empty when the error
    /// concerns the whole input (size).
    pub pkg: Package,
    /// `None`: the whole input parsed.
    pub cut: Option<Cut>,
}

/// Where and how parsing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub error: ParseError,
    /// Whether the last section of [`Prefix::pkg`] may be missing options:
    /// true unless the error was in a `config` statement (which would have
    /// ended that section anyway).
    pub last_section_open: bool,
}

/// Like [`parse_prefix`] on bytes: invalid UTF-8 cuts the input at the
/// start of the line holding the first bad byte.
pub(super) fn parse_bytes_prefix(bytes: &[u8]) -> Prefix {
    if let Err(error) = check_size(bytes.len()) {
        return whole_input(error);
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_prefix(text),
        Err(e) => {
            let (line, column) = position_of(bytes, e.valid_up_to());
            let error = ParseError {
                line,
                column,
                kind: ParseErrorKind::InvalidUtf8,
            };
            // Valid UTF-8 up to there, so slicing at a line start is safe.
            let before = std::str::from_utf8(&bytes[..line_start(bytes, e.valid_up_to())])
                .unwrap_or_default();
            cut_before(before, error)
        }
    }
}

/// Parses `text` up to its first syntax error. The statements before the
/// error are applied as usual; nothing after it is read (libuci stops
/// there too, and a resync could misread the rest, e.g. after an
/// unterminated quote).
pub(super) fn parse_prefix(text: &str) -> Prefix {
    if let Err(error) = check_size(text.len()) {
        return whole_input(error);
    }
    if let Err(error) = check_lines(text.as_bytes()) {
        // Line limits are checked before lexing: parse the lines before
        // the bad one (any earlier syntax error is reported instead).
        let offset = nth_line_start(text.as_bytes(), error.line);
        return cut_before(&text[..offset], error);
    }
    let mut lexer = Lexer {
        b: text.as_bytes(),
        src: text,
        pos: 0,
        line: 1,
        col: 1,
    };
    let mut builder = Builder::default();
    loop {
        let stmt = match lexer.statement() {
            Ok(Some(stmt)) => stmt,
            Ok(None) => break,
            Err(error) => return builder.cut(error, true),
        };
        let closes = keyword(&stmt[0]) == Some("config");
        if let Err(error) = builder.apply(stmt) {
            return builder.cut(error, !closes);
        }
    }
    Prefix {
        pkg: builder.pkg,
        cut: None,
    }
}

fn whole_input(error: ParseError) -> Prefix {
    Prefix {
        pkg: Package::default(),
        cut: Some(Cut {
            error,
            last_section_open: false,
        }),
    }
}

/// The prefix `before` (which ends at a line start) cut by `error`; an
/// earlier error inside `before` wins.
fn cut_before(before: &str, error: ParseError) -> Prefix {
    let p = parse_prefix(before);
    if p.cut.is_some() {
        return p;
    }
    Prefix {
        pkg: p.pkg,
        cut: Some(Cut {
            error,
            last_section_open: true,
        }),
    }
}

/// Byte offset where the line holding byte `at` starts.
fn line_start(bytes: &[u8], at: usize) -> usize {
    bytes[..at.min(bytes.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
}

/// Byte offset where 1-based line `line` starts (the end if it has fewer).
fn nth_line_start(bytes: &[u8], line: u32) -> usize {
    if line <= 1 {
        return 0;
    }
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(line as usize - 2)
        .map_or(bytes.len(), |(i, _)| i + 1)
}

fn check_size(size: usize) -> Result<(), ParseError> {
    if size > MAX_FILE_BYTES {
        return Err(ParseError {
            line: 0,
            column: 0,
            kind: ParseErrorKind::FileTooLarge {
                size,
                max: MAX_FILE_BYTES,
            },
        });
    }
    Ok(())
}

/// Line and character column of byte offset `at` (valid UTF-8 before it).
fn position_of(bytes: &[u8], at: usize) -> (u32, u32) {
    let before = &bytes[..at.min(bytes.len())];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before[line_start..]
        .iter()
        .filter(|&&b| !is_continuation(b))
        .count()
        + 1;
    (sat_u32(line), sat_u32(column))
}

fn sat_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Physical-line limits and NUL bytes, checked before lexing so the lexer
/// never sees either.
fn check_lines(b: &[u8]) -> Result<(), ParseError> {
    let mut start = 0;
    for (line_no, line) in b.split(|&c| c == b'\n').enumerate() {
        let line_no = sat_u32(line_no + 1);
        if line.len() > MAX_LINE_BYTES {
            let (_, column) = position_of(b, start + MAX_LINE_BYTES);
            return Err(ParseError {
                line: line_no,
                column,
                kind: ParseErrorKind::LineTooLong {
                    max: MAX_LINE_BYTES,
                },
            });
        }
        if let Some(i) = line.iter().position(|&c| c == 0) {
            let (_, column) = position_of(b, start + i);
            return Err(ParseError {
                line: line_no,
                column,
                kind: ParseErrorKind::NulByte,
            });
        }
        start += line.len() + 1;
    }
    Ok(())
}

/// One word of a statement with the position where it starts.
#[derive(Debug)]
struct Word {
    text: String,
    /// Quotes or escapes were involved: such a word is never a keyword.
    plain: bool,
    line: u32,
    col: u32,
}

struct Lexer<'a> {
    b: &'a [u8],
    src: &'a str,
    pos: usize,
    line: u32,
    col: u32,
}

/// Words beyond this in one statement are refused without being stored,
/// so a long line of junk cannot build a large vector.
const MAX_WORDS: usize = 8;

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn bump(&mut self) {
        if let Some(&c) = self.b.get(self.pos) {
            self.pos += 1;
            if c == b'\n' {
                self.line = self.line.saturating_add(1);
                self.col = 1;
            } else if !is_continuation(c) {
                self.col = self.col.saturating_add(1);
            }
        }
    }

    fn err(&self, line: u32, col: u32, kind: ParseErrorKind) -> ParseError {
        ParseError {
            line,
            column: col,
            kind,
        }
    }

    /// Next statement's words, or `None` at end of input. Empty
    /// statements (blank lines, comments, lone `;`) are skipped.
    fn statement(&mut self) -> Result<Option<Vec<Word>>, ParseError> {
        let mut words: Vec<Word> = Vec::new();
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | 0x0b | 0x0c)) {
                self.bump();
            }
            match self.peek() {
                None => break,
                Some(b'\n' | b';') => {
                    self.bump();
                    if words.is_empty() {
                        continue;
                    }
                    break;
                }
                Some(b'#') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                Some(_) => {
                    let (line, col) = (self.line, self.col);
                    if let Some(w) = self.word()? {
                        if words.len() == MAX_WORDS {
                            let command = keyword(&words[0]).unwrap_or("?");
                            return Err(self.err(
                                line,
                                col,
                                ParseErrorKind::TooManyArguments { command },
                            ));
                        }
                        words.push(w);
                    }
                }
            }
        }
        Ok(if words.is_empty() { None } else { Some(words) })
    }

    /// Reads one word; `None` if only a line continuation was there.
    fn word(&mut self) -> Result<Option<Word>, ParseError> {
        let (line, col) = (self.line, self.col);
        let mut text = String::new();
        let mut started = false;
        let mut plain = true;
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c | b'\n' | b'#' | b';' => break,
                b'\'' => {
                    let (ql, qc) = (self.line, self.col);
                    self.bump();
                    started = true;
                    plain = false;
                    loop {
                        match self.peek() {
                            None => {
                                return Err(self.err(
                                    ql,
                                    qc,
                                    ParseErrorKind::UnterminatedQuote { quote: '\'' },
                                ))
                            }
                            Some(b'\'') => {
                                self.bump();
                                break;
                            }
                            Some(_) => self.take_char(&mut text, line, col)?,
                        }
                    }
                }
                b'"' => {
                    let (ql, qc) = (self.line, self.col);
                    self.bump();
                    started = true;
                    plain = false;
                    loop {
                        match self.peek() {
                            None => {
                                return Err(self.err(
                                    ql,
                                    qc,
                                    ParseErrorKind::UnterminatedQuote { quote: '"' },
                                ))
                            }
                            Some(b'"') => {
                                self.bump();
                                break;
                            }
                            Some(b'\\') => {
                                self.backslash(&mut text, line, col)?;
                            }
                            Some(_) => self.take_char(&mut text, line, col)?,
                        }
                    }
                }
                b'\\' => {
                    if self.backslash(&mut text, line, col)? {
                        started = true;
                        plain = false;
                    }
                }
                _ => {
                    started = true;
                    self.take_char(&mut text, line, col)?;
                }
            }
        }
        Ok(started.then_some(Word {
            text,
            plain,
            line,
            col,
        }))
    }

    /// Handles a backslash at the cursor: an escaped character (returns
    /// true) or a line continuation (returns false; nothing is added).
    fn backslash(&mut self, text: &mut String, line: u32, col: u32) -> Result<bool, ParseError> {
        self.bump();
        match (self.peek(), self.b.get(self.pos + 1)) {
            (None, _) => Ok(false),
            (Some(b'\n'), _) => {
                self.bump();
                Ok(false)
            }
            (Some(b'\r'), Some(b'\n')) => {
                self.bump();
                self.bump();
                Ok(false)
            }
            _ => {
                self.take_char(text, line, col)?;
                Ok(true)
            }
        }
    }

    /// Appends the (possibly multi-byte) character at the cursor.
    fn take_char(&mut self, text: &mut String, line: u32, col: u32) -> Result<(), ParseError> {
        let ch = match self.peek() {
            None => return Ok(()),
            Some(b) if b.is_ascii() => char::from(b),
            Some(_) => match self.src.get(self.pos..).and_then(|s| s.chars().next()) {
                Some(ch) => ch,
                None => return Ok(()),
            },
        };
        if text.len() + ch.len_utf8() > MAX_VALUE_BYTES {
            return Err(self.err(
                line,
                col,
                ParseErrorKind::ValueTooLong {
                    max: MAX_VALUE_BYTES,
                },
            ));
        }
        text.push(ch);
        for _ in 0..ch.len_utf8() {
            self.bump();
        }
        Ok(())
    }
}

/// The command a statement's first word names, accepting libuci's
/// one-letter abbreviations.
fn keyword(w: &Word) -> Option<&'static str> {
    if !w.plain {
        return None;
    }
    Some(match w.text.as_str() {
        "package" | "p" => "package",
        "config" | "c" => "config",
        "option" | "o" => "option",
        "list" | "l" => "list",
        _ => return None,
    })
}

#[derive(Default)]
struct Builder {
    pkg: Package,
    /// Line of each section's `config` statement, parallel to `pkg.sections`.
    lines: Vec<u32>,
    by_name: HashMap<String, usize>,
}

impl Builder {
    fn cut(self, error: ParseError, open: bool) -> Prefix {
        let last_section_open = open && !self.pkg.sections.is_empty();
        Prefix {
            pkg: self.pkg,
            cut: Some(Cut {
                error,
                last_section_open,
            }),
        }
    }

    fn apply(&mut self, words: Vec<Word>) -> Result<(), ParseError> {
        let first = &words[0];
        let Some(command) = keyword(first) else {
            return Err(ParseError {
                line: first.line,
                column: first.col,
                kind: ParseErrorKind::UnknownCommand(first.text.clone()),
            });
        };
        let (line, col) = (first.line, first.col);
        let err = |w: Option<&Word>, kind| ParseError {
            line: w.map_or(line, |w| w.line),
            column: w.map_or(col, |w| w.col),
            kind,
        };
        let max_args = if command == "package" { 1 } else { 2 };
        // libuci treats empty trailing arguments as absent.
        if let Some(extra) = words.iter().skip(1 + max_args).find(|w| !w.text.is_empty()) {
            return Err(err(
                Some(extra),
                ParseErrorKind::TooManyArguments { command },
            ));
        }
        let arg = |i: usize| words.get(i).filter(|w| !w.text.is_empty());
        match command {
            "package" => {
                let Some(name) = arg(1) else {
                    return Err(err(None, missing(command, "a package name")));
                };
                if !is_valid_package_name(&name.text) {
                    return Err(err(Some(name), invalid("package name", &name.text)));
                }
                if self.pkg.name.is_some() || !self.pkg.sections.is_empty() {
                    return Err(err(None, ParseErrorKind::MisplacedPackage));
                }
                self.pkg.name = Some(name.text.clone());
            }
            "config" => {
                let Some(ty) = arg(1) else {
                    return Err(err(None, missing(command, "a section type")));
                };
                if !is_valid_type(&ty.text) {
                    return Err(err(Some(ty), invalid("section type", &ty.text)));
                }
                if self.pkg.sections.len() == MAX_SECTIONS {
                    return Err(err(
                        None,
                        ParseErrorKind::TooManySections { max: MAX_SECTIONS },
                    ));
                }
                let name = match arg(2) {
                    None => None,
                    Some(n) if !is_valid_name(&n.text) => {
                        return Err(err(Some(n), invalid("section name", &n.text)))
                    }
                    Some(n) => {
                        if let Some(&i) = self.by_name.get(&n.text) {
                            return Err(err(
                                Some(n),
                                ParseErrorKind::DuplicateSection {
                                    name: n.text.clone(),
                                    first_line: self.lines[i],
                                },
                            ));
                        }
                        self.by_name.insert(n.text.clone(), self.pkg.sections.len());
                        Some(n.text.clone())
                    }
                };
                self.pkg.sections.push(Section::new(ty.text.clone(), name));
                self.lines.push(line);
            }
            _ => {
                let Some(section) = self.pkg.sections.last_mut() else {
                    return Err(err(None, ParseErrorKind::OptionOutsideSection));
                };
                let Some(name) = arg(1) else {
                    return Err(err(None, missing(command, "an option name")));
                };
                if !is_valid_name(&name.text) {
                    return Err(err(Some(name), invalid("option name", &name.text)));
                }
                let value = words.get(2).map_or_else(String::new, |w| w.text.clone());
                let existing = section.options.iter_mut().find(|o| o.name == name.text);
                match existing {
                    Some(o) if command == "option" => o.value = Value::Single(value),
                    Some(o) => {
                        // `list` after `option` of the same name turns it into
                        // a list, as libuci's uci_add_list does.
                        if let Value::Single(old) = &mut o.value {
                            o.value = Value::List(vec![std::mem::take(old)]);
                        }
                        if let Value::List(items) = &mut o.value {
                            if items.len() == MAX_LIST_ITEMS {
                                return Err(err(
                                    Some(name),
                                    ParseErrorKind::TooManyListItems {
                                        max: MAX_LIST_ITEMS,
                                    },
                                ));
                            }
                            items.push(value);
                        }
                    }
                    None => {
                        if section.options.len() == MAX_OPTIONS_PER_SECTION {
                            return Err(err(
                                Some(name),
                                ParseErrorKind::TooManyOptions {
                                    max: MAX_OPTIONS_PER_SECTION,
                                },
                            ));
                        }
                        let value = if command == "list" {
                            Value::List(vec![value])
                        } else {
                            Value::Single(value)
                        };
                        section.options.push(UciOption {
                            name: name.text.clone(),
                            value,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

fn missing(command: &'static str, what: &'static str) -> ParseErrorKind {
    ParseErrorKind::MissingArgument { command, what }
}

fn invalid(what: &'static str, name: &str) -> ParseErrorKind {
    ParseErrorKind::InvalidName {
        what,
        name: clip(name),
    }
}
