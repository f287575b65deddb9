//! Approvals persist as `peer` sections in agentd's own configuration
//! file (`agentctl approve` / `revoke`): the file stays the one place that
//! says who the peers are, a restart keeps them, and the ARPX session
//! comes up by the same reload path as for a hand-written peer.
//!
//! The edit works on the parsed package (every other section and option
//! is written back as it was; comments are not kept, as with `uci
//! commit`), is checked to load strictly before anything is written, and
//! replaces the file atomically (a temporary file in the same directory,
//! synced, renamed over it), so a crash leaves the old or the new file,
//! never a mix.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use uci_schema::uci::{Package, Section, Value};

use super::table::Candidate;

/// Why the file was not changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// No discovered peer section for the router.
    NotApproved { router_id: String },
    /// The approved version is another one.
    VersionMismatch {
        router_id: String,
        asked: u32,
        approved: u32,
    },
    /// A peer section not written by approve names the router.
    StaticPeer { router_id: String, section: String },
    /// The file (or the edited file) does not load.
    Invalid(String),
    /// Reading or writing the file failed.
    Io(String),
}

impl EditError {
    pub fn code(&self) -> &'static str {
        match self {
            EditError::NotApproved { .. } => "not_approved",
            EditError::VersionMismatch { .. } => "version_mismatch",
            EditError::StaticPeer { .. } => "static_peer",
            EditError::Invalid(_) => "config_invalid",
            EditError::Io(_) => "config_write_failed",
        }
    }
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EditError::NotApproved { router_id } => {
                write!(
                    f,
                    "router {router_id} has no approved (discovered) peer section"
                )
            }
            EditError::VersionMismatch {
                router_id,
                asked,
                approved,
            } => write!(
                f,
                "router {router_id} is approved at record version {approved}, not {asked}"
            ),
            EditError::StaticPeer { router_id, section } => write!(
                f,
                "router {router_id} is a configured peer ({section}); edit that section instead"
            ),
            EditError::Invalid(why) => write!(f, "the configuration would not load: {why}"),
            EditError::Io(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for EditError {}

fn single<'a>(s: &'a Section, name: &str) -> Option<&'a str> {
    match s.get(name) {
        Some(Value::Single(v)) => Some(v),
        _ => None,
    }
}

fn is_discovered(s: &Section) -> bool {
    single(s, "discovered").is_some_and(|v| uci_schema::schema::parse_bool(v) == Some(true))
}

fn describe(pkg: &Package, pos: usize) -> String {
    pkg.address(pos)
        .map_or_else(|| format!("peer #{pos}"), |a| format!("peer {a}"))
}

/// Section name of a router's approval: `disc_` + router_id with `-` as
/// `_` (UCI names are `[A-Za-z0-9_]`), made unique in the package.
fn section_name(pkg: &Package, router_id: &str) -> String {
    let base = format!("disc_{}", router_id.replace('-', "_"));
    let mut name = base.clone();
    let mut n = 2;
    while pkg.section(&name).is_some() {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// Writes (or replaces) the approval of `c` at its record version.
/// Returns the section name.
pub fn approve(pkg: &mut Package, c: &Candidate) -> Result<String, EditError> {
    let r = &c.seen.record;
    let mut statics =
        pkg.sections.iter().enumerate().filter(|(_, s)| {
            s.ty == "peer" && single(s, "router_id") == Some(r.router_id.as_str())
        });
    if let Some((pos, _)) = statics.find(|(_, s)| !is_discovered(s)) {
        return Err(EditError::StaticPeer {
            router_id: r.router_id.clone(),
            section: describe(pkg, pos),
        });
    }
    pkg.sections
        .retain(|s| !(s.ty == "peer" && single(s, "router_id") == Some(r.router_id.as_str())));
    let name = section_name(pkg, &r.router_id);
    let mut s = Section::new("peer", Some(name.clone()));
    s.set("router_id", r.router_id.as_str());
    s.set("address", c.seen.address.to_string());
    s.set("port", c.seen.port.to_string());
    s.set("data_port", r.data_port.to_string());
    s.set("key_fingerprint", r.fingerprint.to_string());
    s.set("discovered", "1");
    s.set("record_version", r.version.to_string());
    pkg.sections.push(s);
    Ok(name)
}

/// Removes the approval of `router_id` made at `version`. Returns the
/// removed section's name, as [`approve`] returns the written one (the
/// `section` of the ubus/agentctl answer), or its `@peer[N]` address
/// when a hand-written discovered section is anonymous.
pub fn revoke(pkg: &mut Package, router_id: &str, version: u32) -> Result<String, EditError> {
    let found = pkg.sections.iter().enumerate().find(|(_, s)| {
        s.ty == "peer" && single(s, "router_id") == Some(router_id) && is_discovered(s)
    });
    let Some((pos, s)) = found else {
        if let Some(pos) = pkg
            .sections
            .iter()
            .position(|s| s.ty == "peer" && single(s, "router_id") == Some(router_id))
        {
            return Err(EditError::StaticPeer {
                router_id: router_id.into(),
                section: describe(pkg, pos),
            });
        }
        return Err(EditError::NotApproved {
            router_id: router_id.into(),
        });
    };
    let approved = single(s, "record_version")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    if approved != version {
        return Err(EditError::VersionMismatch {
            router_id: router_id.into(),
            asked: version,
            approved,
        });
    }
    let name = s.name.clone().unwrap_or_else(|| {
        pkg.address(pos)
            .map_or_else(|| format!("@peer[{pos}]"), |a| a.to_string())
    });
    pkg.sections.remove(pos);
    Ok(name)
}

/// Reads `path`, applies `edit`, checks that the result loads strictly
/// (as a reload will load it) and replaces the file atomically. Returns what `edit` returned.
pub fn edit_file<T>(
    path: &Path,
    edit: impl FnOnce(&mut Package) -> Result<T, EditError>,
) -> Result<T, EditError> {
    let mut pkg =
        uci_schema::config::load_package(path).map_err(|e| EditError::Invalid(e.to_string()))?;
    let out = edit(&mut pkg)?;
    let text = pkg.write().map_err(|e| EditError::Invalid(e.to_string()))?;
    // The check a reload makes, on the file as a whole (an approval in a
    // file without router_id would be written only to be refused).
    crate::config::load_str(&text, &path.display().to_string())
        .map_err(|e| EditError::Invalid(e.to_string()))?;
    replace(path, text.as_bytes())
        .map_err(|e| EditError::Io(format!("cannot write {}: {e}", path.display())))?;
    Ok(out)
}

/// Atomic replace: temp file beside `path` (same mode), fsync, rename,
/// fsync of the directory.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "config".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.agentd-{}.tmp", std::process::id()));
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::record::Record;
    use crate::discovery::table::Sighting;
    use crate::time::Millis;
    use router_pki::Fingerprint;

    fn candidate(key: u8) -> Candidate {
        Candidate {
            seen: Sighting {
                source: crate::discovery::table::Source::Mdns,
                instance: "router-b".into(),
                record: Record::ours("router-b", "", Fingerprint([key; 32]), 7444, 7447),
                address: "192.0.2.2".parse().unwrap(),
                port: 7444,
            },
            announced: true,
            last_seen: Millis(0),
        }
    }

    const FILE: &str = "
config agentd 'main'
\toption router_id 'router-a'

config peer 'static_c'
\toption router_id 'router-c'
\toption address '192.0.2.3'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
\toption tenant 'lab'
";

    #[test]
    fn approve_writes_one_discovered_section_and_keeps_the_rest() {
        let dir = std::env::temp_dir().join(format!("agentd-approval-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agentd");
        std::fs::write(&path, FILE).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = candidate(2);
        let name = edit_file(&path, |p| approve(p, &c)).unwrap();
        assert_eq!(name, "disc_router_b");
        let cfg = uci_schema::Config::load(&path).unwrap();
        assert_eq!(cfg.routes.len(), 1, "other sections kept");
        let b = cfg
            .peers
            .iter()
            .find(|p| p.router_id == "router-b")
            .unwrap();
        assert!(b.discovered);
        assert_eq!(b.record_version, u64::from(c.seen.record.version));
        assert_eq!(b.key_fingerprint, c.seen.record.fingerprint.to_string());
        assert_eq!((b.address.as_str(), b.port), ("192.0.2.2", 7444));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "mode kept");
        // Approving a new version replaces the section.
        let c2 = candidate(3);
        edit_file(&path, |p| approve(p, &c2)).unwrap();
        let cfg = uci_schema::Config::load(&path).unwrap();
        let bs: Vec<_> = cfg
            .peers
            .iter()
            .filter(|p| p.router_id == "router-b")
            .collect();
        assert_eq!(bs.len(), 1);
        assert_eq!(bs[0].record_version, u64::from(c2.seen.record.version));
        // Revoke: the wrong version is refused, naming the approved one.
        let v = c2.seen.record.version;
        let err = edit_file(&path, |p| revoke(p, "router-b", v + 1)).unwrap_err();
        assert_eq!(
            err,
            EditError::VersionMismatch {
                router_id: "router-b".into(),
                asked: v + 1,
                approved: v
            }
        );
        // The removed section is named as approve named it.
        assert_eq!(
            edit_file(&path, |p| revoke(p, "router-b", v)).unwrap(),
            "disc_router_b"
        );
        let cfg = uci_schema::Config::load(&path).unwrap();
        assert!(cfg.peers.iter().all(|p| p.router_id != "router-b"));
        assert_eq!(cfg.peers.len(), 1, "the static peer stays");
        assert_eq!(
            edit_file(&path, |p| revoke(p, "router-b", v)).unwrap_err(),
            EditError::NotApproved {
                router_id: "router-b".into()
            }
        );
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_static_peer_is_never_rewritten() {
        let mut pkg = Package::parse(FILE).unwrap();
        let mut c = candidate(2);
        c.seen.record.router_id = "router-c".into();
        let err = approve(&mut pkg, &c).unwrap_err();
        assert!(matches!(err, EditError::StaticPeer { .. }), "{err:?}");
        assert_eq!(err.code(), "static_peer");
        let err = revoke(&mut pkg, "router-c", 1).unwrap_err();
        assert!(matches!(err, EditError::StaticPeer { .. }), "{err:?}");
        assert_eq!(pkg, Package::parse(FILE).unwrap(), "nothing changed");
    }

    #[test]
    fn an_edit_that_would_not_load_is_not_written() {
        let dir = std::env::temp_dir().join(format!("agentd-approval-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agentd");
        let bad = format!("{FILE}\nconfig peer 'x'\n\toption port 'nope'\n");
        std::fs::write(&path, &bad).unwrap();
        let c = candidate(2);
        let err = edit_file(&path, |p| approve(p, &c)).unwrap_err();
        assert!(matches!(err, EditError::Invalid(_)), "{err:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An approval is a peer section: in a file without a router_id it
    /// would be written only for the reload to refuse it, so it is not
    /// written, and the message says what is missing.
    #[test]
    fn an_approval_needs_the_router_id_a_reload_needs() {
        let dir = std::env::temp_dir().join(format!("agentd-approval-rid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agentd");
        let text = "config agentd 'main'\n\toption log_level 'info'\n";
        std::fs::write(&path, text).unwrap();
        let err = edit_file(&path, |p| approve(p, &candidate(2))).unwrap_err();
        let EditError::Invalid(why) = &err else {
            panic!("{err:?}")
        };
        assert!(
            why.contains("option 'router_id': required when peer sections"),
            "{why}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
