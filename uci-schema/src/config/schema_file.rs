//! `mapping.input_schema_file`: a JSON Schema kept in a file of its own
//! (schemas are long and awkward as one UCI value). The file is read when
//! the configuration is loaded by whoever uses the mapping, bounded in
//! size, and must hold one JSON object, like `input_schema`.

use std::fmt;
use std::io::Read as _;
use std::path::Path;

/// Largest accepted schema file.
pub const MAX_SCHEMA_FILE_BYTES: usize = 64 * 1024;

/// Why a schema file is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaFileError {
    Io(String),
    TooLarge { max: usize },
    NotAnObject,
}

impl fmt::Display for SchemaFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaFileError::Io(m) => write!(f, "cannot read: {m}"),
            SchemaFileError::TooLarge { max } => write!(f, "larger than {max} bytes"),
            SchemaFileError::NotAnObject => f.write_str("does not hold a JSON object"),
        }
    }
}

impl std::error::Error for SchemaFileError {}

/// The schema text of `path` (checked to be one JSON object).
pub fn read_schema_file(path: &Path) -> Result<String, SchemaFileError> {
    let f = std::fs::File::open(path).map_err(|e| SchemaFileError::Io(e.to_string()))?;
    let mut bytes = Vec::new();
    f.take(MAX_SCHEMA_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SchemaFileError::Io(e.to_string()))?;
    if bytes.len() > MAX_SCHEMA_FILE_BYTES {
        return Err(SchemaFileError::TooLarge {
            max: MAX_SCHEMA_FILE_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| SchemaFileError::NotAnObject)?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(_)) => Ok(text),
        _ => Err(SchemaFileError::NotAnObject),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_object_and_refuses_the_rest() {
        let dir = std::env::temp_dir().join(format!("uci-schema-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.json");
        std::fs::write(&ok, r#"{"type":"object"}"#).unwrap();
        assert_eq!(read_schema_file(&ok).unwrap(), r#"{"type":"object"}"#);
        let arr = dir.join("arr.json");
        std::fs::write(&arr, "[1]").unwrap();
        assert_eq!(read_schema_file(&arr), Err(SchemaFileError::NotAnObject));
        let big = dir.join("big.json");
        let text = format!(r#"{{"d":"{}"}}"#, "x".repeat(MAX_SCHEMA_FILE_BYTES));
        std::fs::write(&big, text).unwrap();
        assert_eq!(
            read_schema_file(&big),
            Err(SchemaFileError::TooLarge {
                max: MAX_SCHEMA_FILE_BYTES
            })
        );
        assert!(matches!(
            read_schema_file(&dir.join("absent.json")),
            Err(SchemaFileError::Io(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
