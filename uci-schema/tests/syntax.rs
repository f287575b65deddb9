//! The UCI grammar as libuci reads it, feature by feature, and the typed
//! errors (with positions) for what it refuses.

use uci_schema::uci::{
    Package, ParseError, ParseErrorKind, Value, MAX_FILE_BYTES, MAX_LINE_BYTES, MAX_LIST_ITEMS,
    MAX_OPTIONS_PER_SECTION, MAX_SECTIONS, MAX_VALUE_BYTES,
};

fn parse(text: &str) -> Package {
    Package::parse(text).unwrap_or_else(|e| panic!("{e}\n--- input ---\n{text}"))
}

fn err(text: &str) -> ParseError {
    match Package::parse(text) {
        Ok(p) => panic!("accepted: {p:?}"),
        Err(e) => e,
    }
}

fn single(p: &Package, section: usize, option: &str) -> String {
    match p.sections[section].get(option) {
        Some(Value::Single(v)) => v.clone(),
        other => panic!("{option}: {other:?}"),
    }
}

fn list(p: &Package, section: usize, option: &str) -> Vec<String> {
    match p.sections[section].get(option) {
        Some(Value::List(v)) => v.clone(),
        other => panic!("{option}: {other:?}"),
    }
}

#[test]
fn package_line_is_optional_and_recorded() {
    assert_eq!(parse("config a 'x'\n").name, None);
    let p = parse("package agentd\n\nconfig a 'x'\n");
    assert_eq!(p.name.as_deref(), Some("agentd"));
    assert_eq!(p.sections.len(), 1);
}

#[test]
fn named_and_anonymous_sections_keep_file_order_and_uci_addresses() {
    let p = parse("config rule 'a'\nconfig rule\nconfig route\nconfig rule\n");
    let names: Vec<_> = p
        .sections
        .iter()
        .map(|s| (s.ty.as_str(), s.name.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("rule", Some("a")),
            ("rule", None),
            ("route", None),
            ("rule", None)
        ]
    );
    // @type[idx] counts every section of the type, named or not, as uci does.
    assert_eq!(p.address(0).map(|a| a.to_string()).as_deref(), Some("'a'"));
    assert_eq!(
        p.address(1).map(|a| a.to_string()).as_deref(),
        Some("@rule[1]")
    );
    assert_eq!(
        p.address(2).map(|a| a.to_string()).as_deref(),
        Some("@route[0]")
    );
    assert_eq!(
        p.address(3).map(|a| a.to_string()).as_deref(),
        Some("@rule[2]")
    );
    assert_eq!(p.address(4), None);
    assert_eq!(p.sections_of("rule").count(), 3);
    assert!(p.section("a").is_some());
}

#[test]
fn empty_section_name_means_anonymous() {
    let p = parse("config rule ''\n");
    assert_eq!(p.sections[0].name, None);
}

#[test]
fn options_and_lists() {
    let p = parse("config s 'x'\n\toption a 'one'\n\tlist l 'p'\n\tlist l 'q'\n\toption a 'two'\n");
    assert_eq!(
        single(&p, 0, "a"),
        "two",
        "a later option replaces in place"
    );
    assert_eq!(list(&p, 0, "l"), ["p", "q"]);
    assert_eq!(
        p.sections[0].options[0].name, "a",
        "first-definition order kept"
    );
}

#[test]
fn list_after_option_converts_and_option_after_list_replaces() {
    let p = parse("config s 'x'\n option a 'one'\n list a 'two'\n list b 'p'\n option b 'q'\n");
    assert_eq!(list(&p, 0, "a"), ["one", "two"]);
    assert_eq!(single(&p, 0, "b"), "q");
}

#[test]
fn quoting_styles_and_concatenation() {
    let p = parse(concat!(
        "config s 'x'\n",
        "option sq 'a b # c ; d \" \\n'\n",
        "option dq \"a 'b' \\\" \\\\ \\$x\"\n",
        "option bare plain-word_1.2:3\n",
        "option cat 'it'\\''s'\n",
        "option mix ab'c d'\"e f\"g\n",
        "option esc a\\ b\n",
        "option empty ''\n",
        "option utf 'grüße €'\n",
    ));
    assert_eq!(
        single(&p, 0, "sq"),
        "a b # c ; d \" \\n",
        "single quotes keep everything"
    );
    assert_eq!(
        single(&p, 0, "dq"),
        "a 'b' \" \\ $x",
        "double quotes take backslash escapes"
    );
    assert_eq!(single(&p, 0, "bare"), "plain-word_1.2:3");
    assert_eq!(single(&p, 0, "cat"), "it's");
    assert_eq!(single(&p, 0, "mix"), "abc de fg");
    assert_eq!(single(&p, 0, "esc"), "a b");
    assert_eq!(single(&p, 0, "empty"), "");
    assert_eq!(single(&p, 0, "utf"), "grüße €");
}

#[test]
fn comments_whole_line_and_trailing() {
    let p = parse(concat!(
        "# leading comment\n",
        "config s 'x' # after a section\n",
        "\t# indented comment\n",
        "\toption a 'v' # trailing\n",
        "\toption b 'has # inside'\n",
        "\toption c word#rest is comment\n",
        "\toption d # value is empty\n",
    ));
    assert_eq!(p.sections.len(), 1);
    assert_eq!(single(&p, 0, "a"), "v");
    assert_eq!(single(&p, 0, "b"), "has # inside");
    assert_eq!(single(&p, 0, "c"), "word");
    assert_eq!(single(&p, 0, "d"), "");
}

#[test]
fn blank_lines_tabs_spaces_and_crlf() {
    let p = parse("\r\n\n  config\t s \t 'x'  \r\n\t \toption   a\t'v'\r\n\n\n");
    assert_eq!(p.sections[0].ty, "s");
    assert_eq!(single(&p, 0, "a"), "v");
}

#[test]
fn semicolons_separate_statements() {
    let p = parse("config s 'x'; option a 1; option b '2;3';\n");
    assert_eq!(single(&p, 0, "a"), "1");
    assert_eq!(single(&p, 0, "b"), "2;3");
}

#[test]
fn one_letter_keywords_as_libuci_accepts() {
    let p = parse("p agentd\nc s 'x'\no a 1\nl b 2\n");
    assert_eq!(p.name.as_deref(), Some("agentd"));
    assert_eq!(single(&p, 0, "a"), "1");
    assert_eq!(list(&p, 0, "b"), ["2"]);
}

#[test]
fn quoted_values_may_span_lines_and_backslash_newline_continues() {
    let p =
        parse("config s 'x'\noption a 'line1\nline2'\noption b \"x\\\ny\"\noption c ab\\\ncd\n");
    assert_eq!(single(&p, 0, "a"), "line1\nline2");
    assert_eq!(single(&p, 0, "b"), "xy");
    assert_eq!(single(&p, 0, "c"), "abcd");
}

#[test]
fn errors_carry_line_and_column() {
    let e = err("config s 'x'\n\toption a 'open\n");
    assert_eq!((e.line, e.column), (2, 11));
    assert_eq!(e.kind, ParseErrorKind::UnterminatedQuote { quote: '\'' });
    assert_eq!(
        e.to_string(),
        "line 2, column 11: unterminated ' quote (opened here)"
    );

    let e = err("config s 'x'\n  opton a b\n");
    assert_eq!((e.line, e.column), (2, 3));
    assert_eq!(e.kind, ParseErrorKind::UnknownCommand("opton".into()));

    let e = err("config s 'x'\n\"option\" a b\n");
    assert!(
        matches!(e.kind, ParseErrorKind::UnknownCommand(_)),
        "quoted keyword: {e}"
    );

    let e = err("\n option a b\n");
    assert_eq!((e.line, e.kind), (2, ParseErrorKind::OptionOutsideSection));

    let e = err("config\n");
    assert_eq!(
        e.kind,
        ParseErrorKind::MissingArgument {
            command: "config",
            what: "a section type"
        }
    );
    let e = err("config s 'x'\noption '' v\n");
    assert!(matches!(
        e.kind,
        ParseErrorKind::MissingArgument {
            command: "option",
            ..
        }
    ));

    let e = err("config s 'x' extra\n");
    assert_eq!((e.line, e.column), (1, 14));
    assert_eq!(
        e.kind,
        ParseErrorKind::TooManyArguments { command: "config" }
    );
    let e = err("config s 'x'\noption a b c\n");
    assert_eq!(
        e.kind,
        ParseErrorKind::TooManyArguments { command: "option" }
    );
    let e = err("config s 'x'\noption a b c d e f g h i j\n");
    assert_eq!(
        e.kind,
        ParseErrorKind::TooManyArguments { command: "option" }
    );
}

#[test]
fn invalid_names_are_refused() {
    let e = err("config rule 'bad-name'\n");
    assert_eq!((e.line, e.column), (1, 13));
    assert!(
        matches!(
            e.kind,
            ParseErrorKind::InvalidName {
                what: "section name",
                ..
            }
        ),
        "{e}"
    );
    let e = err("config s 'x'\noption bad.name v\n");
    assert!(
        matches!(
            e.kind,
            ParseErrorKind::InvalidName {
                what: "option name",
                ..
            }
        ),
        "{e}"
    );
    let e = err("config 'a b'\n");
    assert!(
        matches!(
            e.kind,
            ParseErrorKind::InvalidName {
                what: "section type",
                ..
            }
        ),
        "{e}"
    );
    let e = err("package 'a.b'\n");
    assert!(
        matches!(
            e.kind,
            ParseErrorKind::InvalidName {
                what: "package name",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn section_names_are_unique_across_types_as_in_libuci() {
    // DESIGN §13 names every singleton 'main'; real libuci refuses that
    // ("section of different type overwrites prior section with same name").
    let e = err("config agentd 'main'\n\toption a 1\n\nconfig gateway 'main'\n");
    assert_eq!((e.line, e.column), (4, 16));
    assert_eq!(
        e.kind,
        ParseErrorKind::DuplicateSection {
            name: "main".into(),
            first_line: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "line 4, column 16: section name 'main' already used at line 1 (names are unique in a package)"
    );
    // Same type twice would be merged by libuci; we refuse it so two
    // copy-pasted routes never collapse silently.
    let e = err("config route 'r'\nconfig route 'r'\n");
    assert!(matches!(e.kind, ParseErrorKind::DuplicateSection { .. }));
}

#[test]
fn package_must_come_first_and_once() {
    assert_eq!(
        err("config s 'x'\npackage p\n").kind,
        ParseErrorKind::MisplacedPackage
    );
    assert_eq!(
        err("package p\npackage q\n").kind,
        ParseErrorKind::MisplacedPackage
    );
}

#[test]
fn input_bounds() {
    let e = Package::parse(&"#".repeat(MAX_FILE_BYTES + 1)).unwrap_err();
    assert_eq!(
        e.kind,
        ParseErrorKind::FileTooLarge {
            size: MAX_FILE_BYTES + 1,
            max: MAX_FILE_BYTES
        }
    );
    assert_eq!(e.line, 0);

    let long = format!("config s 'x'\n# {}\n", "x".repeat(MAX_LINE_BYTES));
    let e = err(&long);
    assert_eq!(
        (e.line, e.kind),
        (
            2,
            ParseErrorKind::LineTooLong {
                max: MAX_LINE_BYTES
            }
        )
    );

    let big = format!(
        "config s 'x'\noption a '{}'\n",
        "v".repeat(MAX_VALUE_BYTES + 1)
    );
    let e = err(&big);
    assert_eq!((e.line, e.column), (2, 10));
    assert_eq!(
        e.kind,
        ParseErrorKind::ValueTooLong {
            max: MAX_VALUE_BYTES
        }
    );
    let exact = format!("config s 'x'\noption a '{}'\n", "v".repeat(MAX_VALUE_BYTES));
    assert_eq!(single(&parse(&exact), 0, "a").len(), MAX_VALUE_BYTES);

    let many: String = (0..=MAX_SECTIONS).map(|_| "config s\n").collect();
    assert_eq!(
        err(&many).kind,
        ParseErrorKind::TooManySections { max: MAX_SECTIONS }
    );

    let opts: String = (0..=MAX_OPTIONS_PER_SECTION)
        .map(|i| format!("option o{i} v\n"))
        .collect();
    let e = err(&format!("config s 'x'\n{opts}"));
    assert_eq!(
        e.kind,
        ParseErrorKind::TooManyOptions {
            max: MAX_OPTIONS_PER_SECTION
        }
    );

    let items: String = (0..=MAX_LIST_ITEMS)
        .map(|i| format!("list l v{i}\n"))
        .collect();
    let e = err(&format!("config s 'x'\n{items}"));
    assert_eq!(
        e.kind,
        ParseErrorKind::TooManyListItems {
            max: MAX_LIST_ITEMS
        }
    );
}

#[test]
fn bytes_input_reports_invalid_utf8_and_nul_positions() {
    let e = Package::parse_bytes(b"config s 'x'\noption a '\xff'\n").unwrap_err();
    assert_eq!(
        (e.line, e.column, e.kind),
        (2, 11, ParseErrorKind::InvalidUtf8)
    );
    let e = Package::parse_bytes(b"config s 'x'\noption a 'b\0'\n").unwrap_err();
    assert_eq!((e.line, e.column, e.kind), (2, 12, ParseErrorKind::NulByte));
    let p = Package::parse_bytes("config s 'é'\n".as_bytes());
    assert!(p.is_err(), "non-ASCII section names are invalid");
}
