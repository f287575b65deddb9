//! `agentctl pki init-identity [--key FILE] [--group NAME|GID]`: make sure the
//! router's identity key exists, for first boot (the feed's uci-defaults
//! script) and for operators preparing a router by hand.
//!
//! The key is created (mode 0600) only when missing; an existing key is
//! never rewritten, so running it again is harmless (`created` says which
//! happened). With `--group`, the key becomes readable by that group
//! (0640, group NAME) and its directory traversable by it (0750): agent-gw
//! runs as its own unprivileged user and signs forwarding assertions and
//! its peer TLS with the same key, so it must be able to read the key;
//! nobody else may (the world bits are cleared either way).

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use router_pki::identity;
use router_pki::Fingerprint;
use serde_json::json;

use super::pki::{key_failure, refused};
use super::run::{Failure, Output};

/// The group id of `name` (a number is taken as the id itself), via the
/// reentrant `getgrnam_r`.
pub fn gid_of(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    let cname = CString::new(name).ok()?;
    // SAFETY: `group` is plain old data; all-zero is a valid value that
    // getgrnam_r overwrites.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and `buf` outlives it;
    // `result` is either null or points at `grp`.
    let rc = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut grp,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some(grp.gr_gid)
}

/// Gives `path` to group `gid` with `mode` (owner unchanged).
fn share_with(path: &Path, gid: u32, mode: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, None, Some(gid))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The key file `--key`, else `agentd.identity` of the config.
pub fn key_path(key: Option<&Path>, config: Option<&Path>) -> PathBuf {
    if let Some(k) = key {
        return k.to_path_buf();
    }
    let file = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(crate::daemon::options::DEFAULT_CONFIG));
    PathBuf::from(
        &uci_schema::Config::load_partial(&file)
            .config
            .agentd
            .identity,
    )
}

pub(super) fn init_identity(path: &Path, group: Option<&str>) -> Result<Output, Failure> {
    // The group first: a refused command leaves nothing behind.
    let gid = match group {
        None => None,
        Some(name) => Some(gid_of(name).ok_or_else(|| {
            refused(
                "invalid_argument",
                format!("--group {name}: no such group on this system"),
            )
        })?),
    };
    let exists = std::fs::symlink_metadata(path).is_ok();
    let key = if exists {
        identity::load_key(path).map_err(key_failure)?
    } else {
        let key = identity::generate_key()
            .map_err(|e| refused("io", format!("no randomness for the key: {e}")))?;
        match identity::create_key_file(path, &key) {
            Ok(()) => key,
            // Someone (agentd starting) created it meanwhile: theirs stands.
            Err(identity::KeyFileError::Exists(_)) => {
                identity::load_key(path).map_err(key_failure)?
            }
            Err(e) => return Err(key_failure(e)),
        }
    };
    if let Some(gid) = gid {
        let io = |p: &Path, e: std::io::Error| refused("io", format!("{}: {e}", p.display()));
        share_with(path, gid, 0o640).map_err(|e| io(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            share_with(dir, gid, 0o750).map_err(|e| io(dir, e))?;
        }
    }
    let fp = Fingerprint::of(&key.verifying_key());
    let public = identity::format_public_key(&key.verifying_key());
    let verb = if exists { "exists (kept)" } else { "created" };
    let shared = group.map_or(String::new(), |g| format!(", readable by group {g}"));
    Ok(Output {
        text: format!(
            "identity key {}: {verb}{shared}\n  fingerprint  {fp}\n  public key   {public}\n",
            path.display()
        ),
        json: json!({
            "path": path.display().to_string(),
            "created": !exists,
            "group": group,
            "fingerprint": fp.to_string(),
            "public_key": public,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pki-id-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn creates_once_and_never_rewrites() {
        let dir = tmp("once");
        let path = dir.join("sub").join("identity.key");
        let first = init_identity(&path, None).unwrap().json;
        assert_eq!(first["created"], true);
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let bytes = std::fs::read(&path).unwrap();
        let again = init_identity(&path, None).unwrap().json;
        assert_eq!(again["created"], false);
        assert_eq!(again["fingerprint"], first["fingerprint"]);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_group_gets_read_access_and_the_world_none() {
        let dir = tmp("group");
        let path = dir.join("identity.key");
        // Our own primary group: a group we may chown to without root.
        // SAFETY: getegid has no preconditions and cannot fail.
        let gid = unsafe { libc::getegid() };
        // SAFETY: getgrgid returns null or a pointer to static storage,
        // read at once.
        let name = unsafe {
            let g = libc::getgrgid(gid);
            assert!(!g.is_null(), "our group has no name");
            std::ffi::CStr::from_ptr((*g).gr_name)
                .to_string_lossy()
                .into_owned()
        };
        let out = init_identity(&path, Some(&name)).unwrap().json;
        assert_eq!(out["group"], name.as_str());
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!((m.mode() & 0o777, m.gid()), (0o640, gid));
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o750);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unknown_group_is_refused_by_name_and_a_broken_key_is_kept() {
        let dir = tmp("bad");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("identity.key");
        let e = init_identity(&path, Some("no-such-group-xyz")).unwrap_err();
        assert_eq!(e.kind, "invalid_argument");
        assert!(e.message.contains("no-such-group-xyz"), "{}", e.message);
        assert!(!path.exists(), "a refused command created the key");
        std::fs::write(&path, b"not a key").unwrap();
        let e = init_identity(&path, None).unwrap_err();
        assert_eq!(e.kind, "invalid_key");
        assert_eq!(std::fs::read(&path).unwrap(), b"not a key");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
