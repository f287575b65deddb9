//! The rpcd exec-plugin protocol behind ubus object `agentd`.
//!
//! rpcd runs `/usr/libexec/rpcd/agentd list` once and expects the method
//! signatures at once (it waits without a timeout, so `list` never
//! contacts the daemon), then `... call METHOD` with the JSON arguments on
//! stdin, and expects one JSON object on stdout. Arguments a method does
//! not know are ignored: uhttpd adds `ubus_rpc_session` to every call it
//! forwards (LuCI's calls all carry it).
//!
//! Every answer is one JSON object (lists are wrapped: `{"routes":[...]}`);
//! every failure is `{"error":{"code":..,"message":..}}` with a stable code
//! — `unreachable` when agentd is down, `invalid_argument` for bad input,
//! the daemon's own code otherwise (e.g. `version_mismatch` for an
//! approve of a record version the candidate no longer announces).

use std::fmt;
use std::io::Read;

use serde_json::{json, Map, Value};

use super::command::{Command, LookupQuery};

/// Largest argument object accepted on stdin. ubus messages are small; a
/// bigger input is a mistake or an attack, not a lookup.
pub const MAX_INPUT: usize = 64 * 1024;

/// Every method of ubus object `agentd` (DESIGN §9), with rpcd's
/// by-example argument types: "str" string, 32 integer, true boolean.
pub fn signatures() -> Value {
    json!({
        "status": {},
        "routes": {},
        "agents": {},
        "lookup": { "capability": "str", "version": 32, "tenant": "str", "source": "str", "explain": true },
        "peers": {},
        "candidates": {},
        "approve": { "id": "str", "version": 32 },
        "revoke": { "id": "str", "version": 32 },
        "reload": {},
        "tasks": {},
        "stats": {},
    })
}

/// Why an rpcd call was refused before reaching the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcdError {
    /// stdin held more than [`MAX_INPUT`] bytes.
    InputTooLarge,
    /// stdin could not be read.
    Read(std::io::ErrorKind),
    /// stdin is not JSON; position of the first error.
    BadJson {
        line: usize,
        column: usize,
    },
    /// stdin is JSON but not an object.
    NotAnObject,
    /// An argument has the wrong type or an invalid value.
    BadArgument {
        name: &'static str,
        expected: &'static str,
    },
    /// A required argument is absent.
    MissingArgument(&'static str),
    UnknownMethod(String),
}

impl RpcdError {
    /// Stable error code for the `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            RpcdError::InputTooLarge
            | RpcdError::Read(_)
            | RpcdError::BadJson { .. }
            | RpcdError::NotAnObject
            | RpcdError::BadArgument { .. }
            | RpcdError::MissingArgument(_) => "invalid_argument",
            RpcdError::UnknownMethod(_) => "unknown_method",
        }
    }

    pub fn to_json(&self) -> Value {
        error_json(self.code(), &self.to_string())
    }
}

impl fmt::Display for RpcdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcdError::InputTooLarge => write!(f, "arguments exceed {MAX_INPUT} bytes"),
            RpcdError::Read(kind) => write!(f, "cannot read arguments from stdin: {kind}"),
            RpcdError::BadJson { line, column } => {
                write!(
                    f,
                    "arguments are not valid JSON (line {line}, column {column})"
                )
            }
            RpcdError::NotAnObject => write!(f, "arguments must be a JSON object"),
            RpcdError::BadArgument { name, expected } => {
                write!(f, "argument {name:?} must be {expected}")
            }
            RpcdError::MissingArgument(name) => write!(f, "argument {name:?} is required"),
            RpcdError::UnknownMethod(m) => write!(f, "object agentd has no method {m:?}"),
        }
    }
}

impl std::error::Error for RpcdError {}

/// `{"error": {"code": code, "message": text}}`, the shape of every error
/// we print (the same as the gateway's HTTP errors).
pub fn error_json(code: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message } })
}

/// Reads at most [`MAX_INPUT`] bytes of arguments. Empty input is `{}`
/// (rpcd sends nothing for methods without arguments).
pub fn read_args(input: impl Read) -> Result<Map<String, Value>, RpcdError> {
    let mut buf = Vec::new();
    input
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| RpcdError::Read(e.kind()))?;
    if buf.len() > MAX_INPUT {
        return Err(RpcdError::InputTooLarge);
    }
    if buf.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&buf) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(RpcdError::NotAnObject),
        Err(e) => Err(RpcdError::BadJson {
            line: e.line(),
            column: e.column(),
        }),
    }
}

fn opt_str(args: &Map<String, Value>, name: &'static str) -> Result<Option<String>, RpcdError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RpcdError::BadArgument {
            name,
            expected: "a string",
        }),
    }
}

fn required_str(args: &Map<String, Value>, name: &'static str) -> Result<String, RpcdError> {
    match opt_str(args, name)? {
        Some(s) if !s.is_empty() => Ok(s),
        Some(_) => Err(RpcdError::BadArgument {
            name,
            expected: "a non-empty string",
        }),
        None => Err(RpcdError::MissingArgument(name)),
    }
}

/// An integer ≥ 1 that fits u32; `None` when absent.
fn opt_version(args: &Map<String, Value>, name: &'static str) -> Result<Option<u32>, RpcdError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or(RpcdError::BadArgument {
                name,
                expected: "an integer ≥ 1",
            }),
    }
}

/// Maps a method and its arguments to the command agentctl runs.
pub fn command_for(method: &str, args: &Map<String, Value>) -> Result<Command, RpcdError> {
    Ok(match method {
        "status" => Command::Status,
        "routes" => Command::Routes,
        "agents" => Command::Agents,
        "reload" => Command::Reload,
        "lookup" => {
            let capability = required_str(args, "capability")?;
            let version = opt_version(args, "version")?;
            let explain = match args.get("explain") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                // ubus callers often send 0/1 for booleans.
                Some(Value::Number(n)) if n.as_u64() == Some(0) => false,
                Some(Value::Number(n)) if n.as_u64() == Some(1) => true,
                Some(_) => {
                    return Err(RpcdError::BadArgument {
                        name: "explain",
                        expected: "a boolean",
                    })
                }
            };
            Command::Lookup(LookupQuery {
                capability,
                version,
                tenant: opt_str(args, "tenant")?,
                source: opt_str(args, "source")?,
                explain,
            })
        }
        "peers" => Command::Peers,
        "candidates" => Command::Candidates,
        "approve" | "revoke" => Command::Admission {
            approve: method == "approve",
            router_id: required_str(args, "id")?,
            version: opt_version(args, "version")?.ok_or(RpcdError::MissingArgument("version"))?,
        },
        "tasks" => Command::Tasks,
        "stats" => Command::Stats,
        other => return Err(RpcdError::UnknownMethod(other.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_method_is_a_command() {
        let sigs = signatures();
        let methods = sigs.as_object().unwrap();
        assert_eq!(methods.len(), 11);
        let args: Map<String, Value> =
            serde_json::from_str(r#"{"capability":"demo.echo","id":"r","version":3}"#).unwrap();
        for m in methods.keys() {
            if let Err(e) = command_for(m, &args) {
                panic!("listed method {m} fails with {e}");
            }
        }
    }

    #[test]
    fn the_session_id_uhttpd_adds_to_every_call_is_ignored() {
        let args =
            read_args(&br#"{"ubus_rpc_session":"8d7f2f1c","capability":"demo.echo"}"#[..]).unwrap();
        assert!(
            matches!(command_for("lookup", &args), Ok(Command::Lookup(q)) if q.capability == "demo.echo")
        );
        assert_eq!(command_for("status", &args), Ok(Command::Status));
    }

    #[test]
    fn lookup_arguments_are_typed() {
        let args =
            read_args(&br#"{"capability":"demo.echo","version":2,"explain":1,"tenant":"lab"}"#[..])
                .unwrap();
        assert_eq!(
            command_for("lookup", &args),
            Ok(Command::Lookup(LookupQuery {
                capability: "demo.echo".into(),
                version: Some(2),
                tenant: Some("lab".into()),
                source: None,
                explain: true
            }))
        );
        let bad = read_args(&br#"{"capability":"x","version":"two"}"#[..]).unwrap();
        assert_eq!(
            command_for("lookup", &bad),
            Err(RpcdError::BadArgument {
                name: "version",
                expected: "an integer ≥ 1"
            })
        );
        assert_eq!(
            command_for("lookup", &Map::new()),
            Err(RpcdError::MissingArgument("capability"))
        );
    }

    #[test]
    fn input_is_bounded_and_must_be_an_object() {
        assert_eq!(read_args(&b""[..]), Ok(Map::new()));
        assert_eq!(read_args(&b"[1]"[..]), Err(RpcdError::NotAnObject));
        assert!(matches!(
            read_args(&b"{oops"[..]),
            Err(RpcdError::BadJson { line: 1, .. })
        ));
        let big = vec![b' '; MAX_INPUT + 1];
        assert_eq!(read_args(&big[..]), Err(RpcdError::InputTooLarge));
    }

    #[test]
    fn unknown_and_unsupported_methods_have_distinct_codes() {
        assert_eq!(
            command_for("nope", &Map::new()).unwrap_err().code(),
            "unknown_method"
        );
        assert_eq!(
            command_for("candidates", &Map::new()),
            Ok(Command::Candidates)
        );
        assert_eq!(command_for("peers", &Map::new()), Ok(Command::Peers));
        assert_eq!(command_for("tasks", &Map::new()), Ok(Command::Tasks));
    }

    #[test]
    fn approve_and_revoke_take_a_typed_id_and_version() {
        let args = |text: &str| read_args(text.as_bytes()).unwrap();
        for m in ["approve", "revoke"] {
            assert_eq!(
                command_for(m, &args(r#"{"version":2}"#)),
                Err(RpcdError::MissingArgument("id"))
            );
            assert_eq!(
                command_for(m, &args(r#"{"id":"router-b"}"#)),
                Err(RpcdError::MissingArgument("version"))
            );
            assert_eq!(
                command_for(m, &args(r#"{"id":"router-b","version":0}"#)),
                Err(RpcdError::BadArgument {
                    name: "version",
                    expected: "an integer ≥ 1"
                })
            );
            assert_eq!(
                command_for(m, &args(r#"{"id":"router-b","version":2}"#)),
                Ok(Command::Admission {
                    approve: m == "approve",
                    router_id: "router-b".into(),
                    version: 2
                })
            );
        }
    }

    #[test]
    fn signatures_use_rpcd_type_examples_only() {
        // rpcd maps a string to STRING, 8/16/32/64 to INTn, a boolean to
        // BOOL (plugin.c, rpc_plugin_parse_signature).
        for (method, sig) in signatures().as_object().unwrap() {
            for (arg, example) in sig.as_object().unwrap() {
                let ok = example == "str"
                    || example.is_boolean()
                    || matches!(example.as_u64(), Some(8 | 16 | 32 | 64));
                assert!(ok, "{method}.{arg}: {example} is not an rpcd type example");
            }
        }
    }
}
