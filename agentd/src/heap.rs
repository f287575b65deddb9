//! Giving libc's free heap back to the system: the one place the suite
//! calls `malloc_trim`. agentd trims after its table halves or a large
//! lease file is written (`daemon::memory`); the gateway trims the large
//! blocks it keeps in libc's malloc once a load is over
//! (`agent_gw::core::heap`).

/// Returns the heap's free pages to the system (glibc); a no-op where
/// the allocator does that by itself (musl's mallocng, OpenWrt's).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and releases glibc's own free lists;
    // it is thread-safe and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
