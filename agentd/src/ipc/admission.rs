//! Who may hold one of the IPC server's connection slots, decided at
//! accept from the peer's `SO_PEERCRED` — before a slot is taken and
//! before a single byte is read, so a local user the socket does not serve
//! cannot tie up slots by connecting and saying nothing.
//!
//! Accounting (the numbers are [`Limits`]):
//!
//! * a uid that may not use the socket is refused at once (no slot);
//! * every non-root uid (the agent-gw user, agentd's own user) holds at
//!   most `per_uid` connections, counted separately per uid, so one of
//!   them can never take another's;
//! * all non-root uids together hold at most `total - root_reserve`, so
//!   root (procd, the operator's `agentctl`) always finds a slot;
//! * root holds at most `total`.
//!
//! A granted [`Slot`] frees itself when dropped (the connection ends).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::message::IpcError;

/// The slot limits of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections in all.
    pub total: usize,
    /// Connections of one non-root uid.
    pub per_uid: usize,
    /// Slots non-root uids can never take.
    pub root_reserve: usize,
}

/// Why a connection was turned away at accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Neither root nor an allowed uid.
    NotPermitted { uid: u32 },
    /// This uid already holds `max` connections.
    UidFull { uid: u32, max: usize },
    /// Every slot open to non-root uids is taken.
    NonRootFull { max: usize },
    /// Every slot is taken.
    Full { max: usize },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotPermitted { uid } => write!(f, "uid {uid} may not use the agentd socket"),
            Refusal::UidFull { uid, max } => {
                write!(f, "uid {uid} already holds {max} IPC connections")
            }
            Refusal::NonRootFull { max } => {
                write!(f, "too many IPC connections ({max} for non-root users)")
            }
            Refusal::Full { max } => write!(f, "too many IPC connections ({max})"),
        }
    }
}

impl From<&Refusal> for IpcError {
    fn from(r: &Refusal) -> IpcError {
        let reason = r.to_string().into();
        match r {
            Refusal::NotPermitted { .. } => IpcError::PermissionDenied { reason },
            _ => IpcError::Unavailable { reason },
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    non_root: usize,
    per_uid: HashMap<u32, usize>,
}

/// The live slot counts of one server.
#[derive(Debug)]
pub struct Admission {
    limits: Limits,
    counts: Mutex<Counts>,
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    admission: Arc<Admission>,
    uid: u32,
}

impl Admission {
    pub fn new(limits: Limits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        // A panic while holding the lock leaves plain counters behind:
        // still usable.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a peer with `uid`, if `permitted` (the caller's access
    /// rule) and the limits allow.
    pub fn admit(self: &Arc<Self>, uid: u32, permitted: bool) -> Result<Slot, Refusal> {
        if !permitted {
            return Err(Refusal::NotPermitted { uid });
        }
        let l = self.limits;
        let mut c = self.counts();
        if c.total >= l.total {
            return Err(Refusal::Full { max: l.total });
        }
        if uid != 0 {
            let non_root_max = l.total.saturating_sub(l.root_reserve);
            let mine = c.per_uid.get(&uid).copied().unwrap_or(0);
            if mine >= l.per_uid {
                return Err(Refusal::UidFull {
                    uid,
                    max: l.per_uid,
                });
            }
            if c.non_root >= non_root_max {
                return Err(Refusal::NonRootFull { max: non_root_max });
            }
            c.non_root += 1;
            *c.per_uid.entry(uid).or_insert(0) += 1;
        }
        c.total += 1;
        Ok(Slot {
            admission: Arc::clone(self),
            uid,
        })
    }

    /// Connections held by `uid` now.
    pub fn held_by(&self, uid: u32) -> usize {
        let c = self.counts();
        if uid == 0 {
            c.total - c.non_root
        } else {
            c.per_uid.get(&uid).copied().unwrap_or(0)
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.admission.counts();
        c.total = c.total.saturating_sub(1);
        if self.uid != 0 {
            c.non_root = c.non_root.saturating_sub(1);
            if let Some(n) = c.per_uid.get_mut(&self.uid) {
                *n -= 1;
                if *n == 0 {
                    c.per_uid.remove(&self.uid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        total: 10,
        per_uid: 3,
        root_reserve: 2,
    };

    #[test]
    fn an_unpermitted_uid_gets_no_slot() {
        let a = Admission::new(L);
        assert_eq!(
            a.admit(65534, false).unwrap_err(),
            Refusal::NotPermitted { uid: 65534 }
        );
        assert_eq!(a.held_by(65534), 0);
    }

    #[test]
    fn one_uid_is_capped_and_others_are_not_affected() {
        let a = Admission::new(L);
        let held: Vec<Slot> = (0..3).map(|_| a.admit(1000, true).unwrap()).collect();
        assert_eq!(
            a.admit(1000, true).unwrap_err(),
            Refusal::UidFull { uid: 1000, max: 3 }
        );
        let other = a.admit(1001, true).expect("another uid has its own count");
        let root = a.admit(0, true).expect("root too");
        drop(held);
        assert_eq!(a.held_by(1000), 0);
        assert!(
            a.admit(1000, true).is_ok(),
            "freed slots can be taken again"
        );
        drop((other, root));
    }

    #[test]
    fn non_root_uids_together_leave_roots_reserve() {
        let a = Admission::new(L);
        let mut held = Vec::new();
        for uid in 1000..1003 {
            for _ in 0..3 {
                if let Ok(s) = a.admit(uid, true) {
                    held.push(s);
                }
            }
        }
        assert_eq!(held.len(), 8, "10 slots minus a reserve of 2");
        assert_eq!(
            a.admit(1003, true).unwrap_err(),
            Refusal::NonRootFull { max: 8 }
        );
        let r1 = a.admit(0, true).unwrap();
        let r2 = a.admit(0, true).unwrap();
        assert_eq!(a.admit(0, true).unwrap_err(), Refusal::Full { max: 10 });
        assert_eq!(a.held_by(0), 2);
        drop((r1, r2, held));
        assert_eq!(a.held_by(0) + a.held_by(1000), 0);
    }

    #[test]
    fn refusals_are_typed_ipc_errors() {
        assert!(matches!(
            IpcError::from(&Refusal::NotPermitted { uid: 5 }),
            IpcError::PermissionDenied { reason } if &*reason == "uid 5 may not use the agentd socket"
        ));
        assert!(matches!(
            IpcError::from(&Refusal::UidFull { uid: 5, max: 8 }),
            IpcError::Unavailable { reason } if &*reason == "uid 5 already holds 8 IPC connections"
        ));
    }
}
