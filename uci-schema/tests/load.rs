//! `Config::load`: real files in the temp dir, I/O and size errors typed
//! and naming the path.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use uci_schema::{Config, ConfigErrorKind};

/// A file in the temp dir, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn with(content: &[u8]) -> TempFile {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("uci-schema-test-{}-{n}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn loads_a_file_and_keeps_the_raw_package() {
    let f = TempFile::with(uci_schema::demo::DEMO_CONFIG.as_bytes());
    let (c, pkg) = Config::load_with_package(&f.0).unwrap();
    assert_eq!(c, Config::load(&f.0).unwrap());
    assert_eq!(pkg.name.as_deref(), Some("agentd"));
    assert_eq!(pkg.sections.len(), 13);
    assert_eq!(pkg.sections[0].ty, "agentd");
}

#[test]
fn missing_file_is_a_typed_io_error_naming_the_path() {
    let path = std::env::temp_dir().join(format!("uci-schema-absent-{}", std::process::id()));
    let e = Config::load(&path).unwrap_err();
    let e = &e.0[0];
    assert_eq!(e.file, path.display().to_string());
    assert!(
        matches!(
            e.kind,
            ConfigErrorKind::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ),
        "{e}"
    );
    assert!(e
        .to_string()
        .starts_with(&format!("{}: cannot read: ", path.display())));
}

#[test]
fn oversized_file_is_refused_before_parsing() {
    let max = uci_schema::uci::MAX_FILE_BYTES;
    let f = TempFile::with(&vec![b'#'; max + 10]);
    let e = Config::load(&f.0).unwrap_err();
    assert_eq!(
        e.0[0].kind,
        ConfigErrorKind::TooLarge {
            size: max as u64 + 10,
            max
        }
    );
}

#[test]
fn errors_in_a_loaded_file_name_its_path() {
    let f = TempFile::with(b"config rule 'r'\n\toption action 'maybe'\n");
    let e = Config::load(&f.0).unwrap_err();
    assert_eq!(e.0[0].file, f.0.display().to_string());
    assert_eq!(e.0[0].option.as_deref(), Some("action"));
    let f = TempFile::with(b"config rule 'r'\n\toption action '\xff'\n");
    let e = Config::load(&f.0).unwrap_err();
    assert!(
        matches!(&e.0[0].kind, ConfigErrorKind::Syntax(p) if p.line == 2),
        "{e}"
    );
}
