//! The Prometheus text exposition format, version 0.0.4: what
//! `GET /metrics` answers. Written here rather than pulled in as a crate
//! because the gateway needs only integer samples of a few dozen
//! families, and the format's rules that matter (names, escaping, one
//! HELP/TYPE block per family, `_total` on counters) fit in a page.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The `Content-Type` of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets when the process restarts); name ends in
    /// `_total`.
    Counter,
    /// Goes up and down (a level: bytes in use, sessions up).
    Gauge,
    /// A value whose kind the exporter does not know.
    Untyped,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Untyped => "untyped",
        }
    }
}

/// Why a family or sample was not written: a bug in the caller's names,
/// never caused by scraped data (label values are escaped, not refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// Not `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    BadMetricName(String),
    /// Not `[a-zA-Z_][a-zA-Z0-9_]*`, or reserved (`__` prefix).
    BadLabelName(String),
    /// A counter whose name does not end in `_total`.
    CounterWithoutTotal(String),
    /// A family written twice: the format wants each family's samples
    /// together under one HELP/TYPE.
    Duplicate(String),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::BadMetricName(n) => write!(f, "metric name {n:?} is not valid"),
            EncodeError::BadLabelName(n) => write!(f, "label name {n:?} is not valid"),
            EncodeError::CounterWithoutTotal(n) => {
                write!(f, "counter {n:?} must end in _total")
            }
            EncodeError::Duplicate(n) => write!(f, "metric family {n:?} written twice"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// One exposition being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
    families: BTreeSet<String>,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Writes one family: HELP, TYPE, then every sample (label pairs and
    /// value). An empty `samples` still writes the HELP/TYPE lines.
    pub fn family<'a, I, L>(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        samples: I,
    ) -> Result<(), EncodeError>
    where
        I: IntoIterator<Item = (L, u64)>,
        L: AsRef<[(&'a str, &'a str)]>,
    {
        if !valid_metric_name(name) {
            return Err(EncodeError::BadMetricName(name.into()));
        }
        if kind == Kind::Counter && !name.ends_with("_total") {
            return Err(EncodeError::CounterWithoutTotal(name.into()));
        }
        if self.families.contains(name) {
            return Err(EncodeError::Duplicate(name.into()));
        }
        // Rendered aside first: a bad label name leaves no half family.
        let mut block = String::new();
        let _ = writeln!(block, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(block, "# TYPE {name} {}", kind.as_str());
        for (labels, value) in samples {
            block.push_str(name);
            let labels = labels.as_ref();
            if !labels.is_empty() {
                block.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    if !valid_label_name(k) {
                        return Err(EncodeError::BadLabelName((*k).into()));
                    }
                    if i > 0 {
                        block.push(',');
                    }
                    let _ = write!(block, "{k}=\"{}\"", escape_label_value(v));
                }
                block.push('}');
            }
            let _ = writeln!(block, " {value}");
        }
        self.families.insert(name.into());
        self.out.push_str(&block);
        Ok(())
    }

    /// One sample without labels.
    pub fn single(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        value: u64,
    ) -> Result<(), EncodeError> {
        self.family(name, kind, help, [(NO_LABELS, value)])
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// The label set of a sample that has none.
pub const NO_LABELS: &[(&str, &str); 0] = &[];

fn valid_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(n: &str) -> bool {
    let mut chars = n.chars();
    !n.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// HELP text: backslash and line feed escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values: backslash, double quote and line feed escaped.
fn escape_label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_family_has_help_type_and_one_line_per_sample() {
        let mut e = Exposition::new();
        e.family(
            "agentgw_requests_total",
            Kind::Counter,
            "Requests answered.",
            [([("code", "200")], 3), ([("code", "404")], 1)],
        )
        .unwrap();
        assert_eq!(
            e.finish(),
            "# HELP agentgw_requests_total Requests answered.\n\
             # TYPE agentgw_requests_total counter\n\
             agentgw_requests_total{code=\"200\"} 3\n\
             agentgw_requests_total{code=\"404\"} 1\n"
        );
    }

    #[test]
    fn gauges_and_samples_without_labels_have_no_braces() {
        let mut e = Exposition::new();
        e.single("agentgw_buffer_used_bytes", Kind::Gauge, "In use.", 42)
            .unwrap();
        assert_eq!(
            e.finish(),
            "# HELP agentgw_buffer_used_bytes In use.\n\
             # TYPE agentgw_buffer_used_bytes gauge\n\
             agentgw_buffer_used_bytes 42\n"
        );
    }

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        let mut e = Exposition::new();
        e.family("x", Kind::Gauge, "h", [([("v", "a\\b\"c\nd")], 1)])
            .unwrap();
        assert!(
            e.finish().ends_with("x{v=\"a\\\\b\\\"c\\nd\"} 1\n"),
            "escaped"
        );
    }

    #[test]
    fn help_escapes_backslash_and_newline_but_not_quotes() {
        let mut e = Exposition::new();
        e.single("x", Kind::Untyped, "a \"q\" \\ \nb", 0).unwrap();
        assert!(e
            .finish()
            .starts_with("# HELP x a \"q\" \\\\ \\nb\n# TYPE x untyped\n"));
    }

    #[test]
    fn counters_must_end_in_total() {
        let mut e = Exposition::new();
        assert_eq!(
            e.single("agentgw_requests", Kind::Counter, "h", 1),
            Err(EncodeError::CounterWithoutTotal("agentgw_requests".into()))
        );
        assert_eq!(e.finish(), "");
    }

    #[test]
    fn bad_names_and_duplicate_families_are_refused_whole() {
        let mut e = Exposition::new();
        assert!(matches!(
            e.single("1x", Kind::Gauge, "h", 1),
            Err(EncodeError::BadMetricName(_))
        ));
        assert!(matches!(
            e.single("x-y", Kind::Gauge, "h", 1),
            Err(EncodeError::BadMetricName(_))
        ));
        assert!(matches!(
            e.family(
                "x",
                Kind::Gauge,
                "h",
                [([("ok", "1")], 1), ([("__r", "1")], 2)]
            ),
            Err(EncodeError::BadLabelName(_))
        ));
        assert!(matches!(
            e.family("x", Kind::Gauge, "h", [([("a-b", "1")], 1)]),
            Err(EncodeError::BadLabelName(_))
        ));
        // Nothing of the refused families was written.
        e.single("x", Kind::Gauge, "h", 1).unwrap();
        assert_eq!(
            e.single("x", Kind::Gauge, "h", 2),
            Err(EncodeError::Duplicate("x".into()))
        );
        assert_eq!(e.finish(), "# HELP x h\n# TYPE x gauge\nx 1\n");
    }
}
