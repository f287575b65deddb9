//! Memory back to the system once a load is over.
//!
//! A router's gateway idles most of the day between bursts. What a burst
//! leaves behind is not state but capacity: kept connections to handlers
//! (each holding its read buffer), and the allocator's free pages kept for
//! reuse. Without this, a gateway that idled at 5 MiB stayed at 10 after a
//! minute of 64 KiB calls (docs/footprint.md). Every second the driver
//! closes pooled handler connections idle past their reuse limit (the pool
//! would never hand them out again), and once the gateway has been quiet
//! for a whole tick after some work it asks the allocator to give back what
//! it keeps — once per quiet spell, never on a hot path.

use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use super::Core;

/// How often the driver looks; also how long "quiet" must last.
pub const TICK: Duration = Duration::from_secs(1);

static RELEASE: OnceLock<fn()> = OnceLock::new();

/// The binary's way to give free memory back (it owns the global
/// allocator, the library does not); unset, quiet spells release nothing.
pub fn set_release(f: fn()) {
    let _ = RELEASE.set(f);
}

/// Gives back what mimalloc keeps: every heap's empty pages and the
/// purges it has only scheduled. mimalloc delays a purge (10 ms) so that
/// a page freed and soon reused costs no system call; a forced collect
/// alone still left the delayed ones committed (+2.5 MiB after a load of
/// 64 KiB calls, against +1.4 MiB with no delay), so the delay is lifted
/// for the collect and restored after it.
#[cfg(target_pointer_width = "64")]
pub fn mimalloc_release() {
    use libmimalloc_sys as mi;
    /// `mi_option_purge_delay` in mimalloc 2's `mi_option_t` (the sys
    /// crate names only the older options).
    const PURGE_DELAY: mi::mi_option_t = 15;
    // SAFETY: option get/set and collect take plain values; the runtime
    // is single-threaded, so no allocation races the changed option.
    unsafe {
        let delay = mi::mi_option_get(PURGE_DELAY);
        mi::mi_option_set(PURGE_DELAY, 0);
        mi::mi_collect(true);
        mi::mi_option_set(PURGE_DELAY, delay);
    }
}

/// When to release, from a count of work done so far (calls finished plus
/// FIB changes applied), the number of calls in flight and how many
/// connections the tick's sweep let go (sans-IO).
#[derive(Debug, Default)]
pub struct Quiet {
    /// Work done at the previous tick.
    seen: u64,
    /// Work happened since the last release.
    dirty: bool,
}

impl Quiet {
    /// Whether to release now: nothing in flight, no work done and no
    /// connection let go during the last tick, after some of that since
    /// the last release. (Connections the sweep lets go close on their own
    /// tasks, after this one yields: their buffers are free by the next
    /// tick, not this one.)
    pub fn tick(&mut self, work: u64, in_flight: usize, swept: usize) -> bool {
        let moved = work != self.seen;
        self.seen = work;
        if moved || in_flight > 0 || swept > 0 {
            self.dirty = true;
            return false;
        }
        std::mem::take(&mut self.dirty)
    }
}

pub async fn run(core: Rc<Core>) {
    let mut quiet = Quiet::default();
    let mut every = tokio::time::interval(TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let swept = core.forwarder.pool().sweep();
        // A burst of registrations grows the replica's table by doubling:
        // the old copies are free memory too.
        let fib_changes = core.fib.borrow().generation().unwrap_or(0);
        let work = core.inflight.finished().wrapping_add(fib_changes);
        if quiet.tick(work, core.inflight.current(), swept) {
            if let Some(release) = RELEASE.get() {
                release();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Quiet;

    #[test]
    fn releases_once_per_quiet_spell_after_work() {
        let mut q = Quiet::default();
        assert!(!q.tick(0, 0, 0), "nothing ever happened");
        assert!(!q.tick(5, 0, 0), "calls finished during this tick");
        assert!(q.tick(5, 0, 0), "a quiet tick after work");
        assert!(!q.tick(5, 0, 0), "already released for this spell");
        assert!(!q.tick(5, 0, 3), "idle connections let go later...");
        assert!(q.tick(5, 0, 0), "...are released once closed");
        assert!(!q.tick(5, 0, 0));
        assert!(!q.tick(5, 1, 0), "a long call in flight");
        assert!(!q.tick(5, 1, 0));
        assert!(q.tick(5, 0, 0), "quiet once it ended");
        assert!(!q.tick(9, 0, 0));
        assert!(
            !q.tick(12, 0, 2),
            "busy again: a sweep then waits for quiet"
        );
        assert!(q.tick(12, 0, 0));
    }
}
