//! agentd keeps only the capability it needs.
//!
//! Under procd agentd runs as root: it owns `/etc/config/agentd` (an
//! approval writes a `peer` section into it), the identity key and the
//! IPC socket, all root's files. Of root's capabilities it needs one:
//! `CAP_NET_ADMIN`, for the per-agent /128 addresses and proxy-NDP entries
//! it sets over rtnetlink (`ipv6.mode`). Its listeners (ARPX 7444, mDNS
//! 5353, the IPC socket) need none, so a port below 1024 in `arpx.listen`
//! is refused at bind (EACCES, logged).
//! procd applies a capabilities file only to a jailed (ujail) instance,
//! so agentd drops the rest itself, first thing in `run`, while it is
//! still one thread: capabilities belong to a thread, and the threads
//! started later (tokio's blocking pool) inherit the reduced
//! sets. The bounding set is cut too, so nothing regains them.

use std::io;

/// `CAP_NET_ADMIN`: addresses, neighbour-proxy entries (rtnetlink).
pub const CAP_NET_ADMIN: u32 = 12;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

fn current() -> io::Result<[CapData; 2]> {
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData (version 3) behind a valid header.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// Whether this thread holds capability `cap` in its effective set.
pub fn holds(cap: u32) -> bool {
    current().is_ok_and(|d| d[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0)
}

/// What [`keep_only`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// The process had no capabilities (not root): nothing to drop.
    NoneHeld,
    /// Everything but these capabilities is gone (permitted, effective,
    /// inheritable and bounding sets).
    Kept(Vec<u32>),
}

/// Drops every capability but `keep` from this thread's sets and from the
/// bounding set. Must run before any other thread is started.
pub fn keep_only(keep: &[u32]) -> io::Result<Dropped> {
    let now = current()?;
    if now.iter().all(|d| d.permitted == 0 && d.effective == 0) {
        return Ok(Dropped::NoneHeld);
    }
    for cap in 0..=last_cap() {
        if keep.contains(&cap) {
            continue;
        }
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            // A number this kernel does not have is not held either.
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e);
            }
        }
    }
    let mut data = [CapData::default(); 2];
    for &cap in keep {
        let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
        // Only what is held can be kept.
        if now[word].permitted & bit != 0 {
            data[word].permitted |= bit;
            data[word].effective |= bit;
        }
    }
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads two CapData (version 3) behind a valid header.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let kept = keep
        .iter()
        .copied()
        .filter(|&c| data[(c / 32) as usize].permitted & (1 << (c % 32)) != 0)
        .collect();
    Ok(Dropped::Kept(kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_sets_are_readable() {
        let now = current().unwrap();
        // The effective set is always within the permitted one.
        for d in now {
            assert_eq!(d.effective & !d.permitted, 0);
        }
    }
}
