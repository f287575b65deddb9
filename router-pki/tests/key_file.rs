//! The identity key file: created once (0600, parent 0700), read back
//! unchanged, never replaced, a malformed or unreadable file an error
//! naming the path.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use router_pki::identity::{self, create_key_file, load_key, load_or_create_key, KeyFileError};

mod common;
use common::TempDir;

#[test]
fn key_is_created_once_with_0600_in_a_0700_directory_and_never_rewritten() {
    let dir = TempDir::new("create");
    let path = dir.0.join("etc/agentd/identity.key");
    let a = load_or_create_key(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
    assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    let text = std::fs::read(&path).unwrap();
    assert!(text.starts_with(b"-----BEGIN PRIVATE KEY-----\n"));

    let b = load_or_create_key(&path).unwrap();
    assert_eq!(a.to_bytes(), b.to_bytes());
    let again = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (again.ino(), again.mtime(), again.mtime_nsec()),
        (meta.ino(), meta.mtime(), meta.mtime_nsec())
    );
    assert_eq!(std::fs::read(&path).unwrap(), text);
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["identity.key"]);
}

#[test]
fn malformed_key_file_is_an_error_naming_it_and_stays_untouched() {
    let dir = TempDir::new("malformed");
    let path = dir.0.join("identity.key");
    std::fs::write(
        &path,
        b"-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let before = std::fs::metadata(&path).unwrap();
    let err = load_or_create_key(&path).unwrap_err();
    assert!(matches!(&err, KeyFileError::Format(p) if *p == path));
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (after.ino(), after.mtime_nsec(), after.len()),
        (before.ino(), before.mtime_nsec(), before.len())
    );
    assert!(std::fs::read(&path)
        .unwrap()
        .starts_with(b"-----BEGIN PRIVATE KEY-----\nnot"));
}

#[test]
fn unreadable_key_path_is_an_io_error_and_nothing_is_created() {
    let dir = TempDir::new("unreadable");
    // A directory where the key should be: reading fails (EISDIR), and
    // the path is not "missing", so no key may be written instead.
    let path = dir.0.join("identity.key");
    std::fs::create_dir(&path).unwrap();
    let err = load_or_create_key(&path).unwrap_err();
    assert!(
        matches!(&err, KeyFileError::Io(p, _) if *p == path),
        "{err}"
    );
    assert!(std::fs::metadata(&path).unwrap().is_dir());
}

#[test]
fn create_key_file_refuses_an_existing_file() {
    let dir = TempDir::new("exists");
    let path = dir.0.join("domain-ca.key");
    let first = identity::generate_key().unwrap();
    create_key_file(&path, &first).unwrap();
    let second = identity::generate_key().unwrap();
    let err = create_key_file(&path, &second).unwrap_err();
    assert!(matches!(&err, KeyFileError::Exists(p) if *p == path));
    assert_eq!(load_key(&path).unwrap().to_bytes(), first.to_bytes());
}

#[test]
fn load_key_creates_nothing() {
    let dir = TempDir::new("readonly");
    let path = dir.0.join("identity.key");
    assert!(matches!(load_key(&path), Err(KeyFileError::Io(..))));
    assert!(!path.exists());
}

#[test]
fn concurrent_first_starts_agree_on_one_key() {
    // agentd and agent-gw both create the identity key at boot: every
    // racer must end up with the one key that landed in the file.
    let dir = TempDir::new("race");
    let path = dir.0.join("identity.key");
    let keys: Vec<[u8; 32]> = std::thread::scope(|s| {
        let racers: Vec<_> = (0..8)
            .map(|_| s.spawn(|| load_or_create_key(&path).unwrap().to_bytes()))
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let on_disk = load_key(&path).unwrap().to_bytes();
    assert!(keys.iter().all(|k| *k == on_disk));
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["identity.key"], "temporary files left behind");
}
