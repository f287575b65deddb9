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
//! The file is encoded on the daemon's loop (a snapshot of the table)
//! into fixed-size pieces ([`Encoded`]) that a blocking thread writes out:
//! one growing buffer for the whole file cost a doubling `Vec`'s slack and
//! copies, and left malloc holding blocks of every size it grew through
//! (~180 B per route at 2 000 routes); pieces of one size are reused by
//! the next write and by everything else.
//!
//! The file is read back as untrusted bytes: bounded size, magic, postcard
//! with typed errors; the state re-validates every route before use.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use postcard::ser_flavors::Flavor;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

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

/// The size of one piece of an encoded file: below glibc's smallest
/// mmap threshold (128 KiB), so pieces come from (and go back to) the
/// heap the routes use, never raise that threshold, and are all alike.
const PIECE: usize = 16 * 1024;

/// An encoded lease file as pieces of [`PIECE`] bytes (the last one
/// shorter), written one after the other.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Encoded {
    pieces: Vec<Vec<u8>>,
}

impl Encoded {
    /// The file's bytes in order.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        self.pieces.iter().map(|p| &p[..])
    }

    /// The file's length in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The whole file in one buffer (tests compare it).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

/// postcard's output into [`Encoded`]'s pieces.
impl Flavor for Encoded {
    type Output = Encoded;

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.try_extend(&[byte])
    }

    fn try_extend(&mut self, mut data: &[u8]) -> postcard::Result<()> {
        while !data.is_empty() {
            if self.pieces.last().is_none_or(|p| p.len() == PIECE) {
                self.pieces.push(Vec::with_capacity(PIECE));
            }
            let piece = self.pieces.last_mut().expect("one was pushed");
            let n = (PIECE - piece.len()).min(data.len());
            piece.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Encoded> {
        Ok(self)
    }
}

/// The leases of a file, serialized straight from an iterator over the
/// table (no list of them is built): postcard's sequence length first,
/// counted by a pass over a clone of the iterator.
struct Leases<I>(I);

impl<'a, I: Iterator<Item = LeaseRef<'a>> + Clone> Serialize for Leases<I> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.clone().count()))?;
        for lease in self.0.clone() {
            seq.serialize_element(&lease)?;
        }
        seq.end()
    }
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

/// Encodes a lease file of `leases` (as [`SavedLease`]s: postcard writes a
/// struct as its fields in order, so the pair below is `SavedFile`'s
/// encoding).
pub fn encode<'a, I>(boot_id: &str, leases: I) -> Result<Encoded, postcard::Error>
where
    I: Iterator<Item = LeaseRef<'a>> + Clone,
{
    let leases = Leases(leases);
    let mut out = Encoded::default();
    out.try_extend(MAGIC)?;
    postcard::serialize_with_flavor(&(boot_id, &leases), out)
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
pub fn write(state_dir: &Path, file: &Encoded) -> Result<(), PersistError> {
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
    for piece in file.pieces() {
        f.write_all(piece).map_err(io)?;
    }
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
                access: Access::default().into(),
                contract: None,
                source: RouteSource::Local,
                path: Box::default(),
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

    fn encoded(boot_id: &str, leases: &[SavedLease]) -> Encoded {
        encode(boot_id, leases.iter().map(SavedLease::borrowed)).unwrap()
    }

    /// The format as it was written in one buffer before the pieces: the
    /// file must not change.
    #[test]
    fn pieces_are_the_whole_buffer_encoding_byte_for_byte() {
        #[derive(Serialize)]
        struct Whole<'a> {
            boot_id: &'a str,
            leases: &'a [SavedLease],
        }
        for n in [0, 1, 2, 300] {
            let leases: Vec<_> = (0..n).map(|i| lease(&format!("r-{i}"))).collect();
            let whole = Whole {
                boot_id: "boot-a",
                leases: &leases,
            };
            let expected = postcard::to_extend(&whole, MAGIC.to_vec()).unwrap();
            let file = encoded("boot-a", &leases);
            assert!(file.pieces().all(|p| p.len() <= PIECE));
            if n == 300 {
                assert!(file.pieces().count() > 1, "{} bytes", expected.len());
            }
            assert_eq!(file.to_vec(), expected, "{n} leases");
            assert_eq!(decode(&file.to_vec(), "boot-a"), Ok(leases));
        }
    }

    #[test]
    fn round_trips_within_one_boot() {
        let leases = vec![lease("r-1"), lease("r-2")];
        let bytes = encoded("boot-a", &leases).to_vec();
        assert_eq!(decode(&bytes, "boot-a"), Ok(leases));
    }

    #[test]
    fn another_boot_or_format_is_refused() {
        let bytes = encoded("boot-a", &[lease("r-1")]).to_vec();
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
