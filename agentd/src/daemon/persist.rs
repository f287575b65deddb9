//! Local leases survive a restart of agentd.
//!
//! Agents hold leases on the *system-wide* monotonic clock, so a deadline
//! saved by one agentd process means the same instant to the next one. The
//! daemon writes its locally registered routes to `state_dir/leases`
//! (coalesced, at most about once a second, and on shutdown); a restarted
//! agentd — after a crash or `kill -9` too — reloads the ones still live,
//! so the gateway's resync finds them and callers see no gap while the
//! agents' next renewals simply succeed.
//!
//! The file records the kernel's boot id: monotonic deadlines from another
//! boot mean nothing, so such a file is ignored. `state_dir` is normally
//! `/var/run/agentd` (tmpfs), which a reboot clears anyway.
//!
//! The file is read back as untrusted bytes: bounded size, magic, postcard
//! with typed errors; the state re-validates every route before use.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::route::Route;

/// File name inside `state_dir`.
pub const FILE_NAME: &str = "leases";
/// Format tag and version; a different one is refused, not misread
/// (2: routes carry their owner; 3: and their origin proof and dispute
/// mark; 4: and whether the agent asked for a public IPv6 address).
const MAGIC: &[u8; 8] = b"AGLEASE4";
/// Largest file read back (about 10 000 routes of generous size).
pub const MAX_FILE_BYTES: usize = 32 * 1024 * 1024;

/// One saved local route and the lease length it was granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedLease {
    pub route: Route,
    pub lease_s: u32,
    /// The agent asked for a public IPv6 address (`daemon::ipv6`).
    pub public_ipv6: bool,
}

impl SavedLease {
    pub fn borrowed(&self) -> LeaseRef<'_> {
        LeaseRef {
            route: &self.route,
            lease_s: self.lease_s,
            public_ipv6: self.public_ipv6,
        }
    }
}

/// [`SavedLease`] borrowed from the route table: the file is encoded from
/// it directly, so a write costs the encoded bytes and no copy of the
/// routes (encoded exactly as a `SavedLease`: serde writes `&T` as `T`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LeaseRef<'a> {
    pub route: &'a Route,
    pub lease_s: u32,
    pub public_ipv6: bool,
}

#[derive(Debug, Deserialize)]
struct SavedFile {
    boot_id: Box<str>,
    leases: Vec<SavedLease>,
}

#[derive(Serialize)]
struct SavedFileRef<'a> {
    boot_id: &'a str,
    leases: &'a [LeaseRef<'a>],
}

/// Why a lease file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistError {
    Io(std::io::ErrorKind),
    TooLarge {
        len: usize,
        max: usize,
    },
    /// Not a lease file of this format version.
    BadMagic,
    Decode(postcard::Error),
    /// Written during another boot: its deadlines are meaningless now.
    OtherBoot,
}

impl fmt::Display for PersistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistError::Io(k) => write!(f, "i/o error: {k}"),
            PersistError::TooLarge { len, max } => {
                write!(f, "{len} bytes exceed the {max}-byte limit")
            }
            PersistError::BadMagic => {
                write!(f, "not an agentd lease file (or another format version)")
            }
            PersistError::Decode(e) => write!(f, "does not decode: {e}"),
            PersistError::OtherBoot => write!(f, "written before the last reboot"),
        }
    }
}

impl std::error::Error for PersistError {}

/// The kernel's id of the current boot (empty if unavailable, which then
/// only matches files written under the same condition).
pub fn boot_id() -> Box<str> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().into())
        .unwrap_or_default()
}

pub fn encode(boot_id: &str, leases: &[LeaseRef<'_>]) -> Result<Vec<u8>, postcard::Error> {
    let file = SavedFileRef { boot_id, leases };
    postcard::to_extend(&file, MAGIC.to_vec())
}

/// Decodes a lease file written during boot `boot_id`.
pub fn decode(bytes: &[u8], boot_id: &str) -> Result<Vec<SavedLease>, PersistError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(PersistError::TooLarge {
            len: bytes.len(),
            max: MAX_FILE_BYTES,
        });
    }
    let body = bytes.strip_prefix(MAGIC).ok_or(PersistError::BadMagic)?;
    let file: SavedFile = match postcard::take_from_bytes(body) {
        Ok((file, [])) => file,
        Ok(_) => {
            return Err(PersistError::Decode(
                postcard::Error::DeserializeBadEncoding,
            ))
        }
        Err(e) => return Err(PersistError::Decode(e)),
    };
    if &*file.boot_id != boot_id {
        return Err(PersistError::OtherBoot);
    }
    Ok(file.leases)
}

pub fn path_in(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// Writes an encoded lease file atomically (temp file + rename), mode 0600.
pub fn write(state_dir: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    std::fs::create_dir_all(state_dir).map_err(|e| PersistError::Io(e.kind()))?;
    let tmp = state_dir.join(format!(".{FILE_NAME}.tmp"));
    let io = |e: std::io::Error| PersistError::Io(e.kind());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path_in(state_dir)).map_err(io)
}

/// Reads the lease file; a missing file is an empty list.
pub fn load(state_dir: &Path, boot_id: &str) -> Result<Vec<SavedLease>, PersistError> {
    use std::io::Read;
    let f = match std::fs::File::open(path_in(state_dir)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PersistError::Io(e.kind())),
    };
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| PersistError::Io(e.kind()))?;
    decode(&bytes, boot_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{Access, Attributes, Lease, RouteId, RouteSource};
    use crate::time::Millis;

    fn lease(id: &str) -> SavedLease {
        SavedLease {
            route: Route {
                id: RouteId::new(id).unwrap(),
                capability: "demo.echo".into(),
                version: 1,
                origin: "agent://lab/echo".into(),
                endpoint: "http://192.0.2.20:9000/invoke".into(),
                tenant: "lab".into(),
                region: "local".into(),
                attrs: Attributes::default(),
                access: Access::default(),
                contract: None,
                source: RouteSource::Local,
                path: Vec::new(),
                next_hop: None,
                lease: Lease::Until(Millis(90_000)),
                healthy: true,
                allow_loopback: false,
                owner: None,
                proof: Default::default(),
                disputed: false,
            },
            lease_s: 30,
            public_ipv6: false,
        }
    }

    fn encoded(boot_id: &str, leases: &[SavedLease]) -> Vec<u8> {
        let refs: Vec<_> = leases.iter().map(SavedLease::borrowed).collect();
        encode(boot_id, &refs).unwrap()
    }

    #[test]
    fn round_trips_within_one_boot() {
        let leases = vec![lease("r-1"), lease("r-2")];
        let bytes = encoded("boot-a", &leases);
        assert_eq!(decode(&bytes, "boot-a"), Ok(leases));
    }

    #[test]
    fn another_boot_or_format_is_refused() {
        let bytes = encoded("boot-a", &[lease("r-1")]);
        assert_eq!(decode(&bytes, "boot-b"), Err(PersistError::OtherBoot));
        assert_eq!(
            decode(b"AGLEASE0xxxx", "boot-a"),
            Err(PersistError::BadMagic)
        );
        assert!(matches!(
            decode(&bytes[..bytes.len() - 3], "boot-a"),
            Err(PersistError::Decode(_))
        ));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            decode(&trailing, "boot-a"),
            Err(PersistError::Decode(_))
        ));
    }

    #[test]
    fn save_and_load_through_the_file_system() {
        let dir = std::env::temp_dir().join(format!("agentd-persist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(load(&dir, "b"), Ok(Vec::new()), "no file yet");
        write(&dir, &encoded("b", &[lease("r-1")])).unwrap();
        assert_eq!(load(&dir, "b"), Ok(vec![lease("r-1")]));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path_in(&dir))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
