//! Logging of both daemons: syslog (OpenWrt `logd`) by default, stderr
//! with `-f`. Syslog stamps its own time; stderr lines start with the
//! wall-clock time in ISO 8601 UTC with milliseconds
//! (`2026-12-01T09:30:12.345Z agentd[info]: ...`) so a foreground log can be
//! lined up with other logs and captures. (Wall time can jump; every
//! deadline in the daemons runs on the monotonic clock, only log lines
//! carry wall time.) Outside the `daemon` feature because agent-gw logs the same
//! way (`agentd::log::init(Sink::Syslog, c"agent-gw")`, then the
//! exported `log_*!` macros).
//!
//! A dozen lines of libc instead of a logging framework: the daemons log
//! a few lines per state change, never per request, and the router image
//! should not carry a formatter stack for that. The level is an atomic so
//! a reload can change `log_level` without re-initialising anything.

use std::ffi::CString;
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;

/// Severity, in syslog order (lower is more severe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 3,
    Warn = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
}

impl Level {
    /// Parses a UCI `log_level` value.
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "error" | "err" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "notice" => Level::Notice,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => return None,
        })
    }

    fn label(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    fn from_u8(v: u8) -> Level {
        match v {
            3 => Level::Error,
            4 => Level::Warn,
            5 => Level::Notice,
            6 => Level::Info,
            _ => Level::Debug,
        }
    }
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Stderr,
    Syslog,
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static TO_SYSLOG: AtomicBool = AtomicBool::new(false);
/// Program name prefixed to stderr lines (syslog adds its own).
static IDENT: OnceLock<&'static str> = OnceLock::new();

/// Chooses the sink and the program name (`ident`, e.g. `c"agentd"`);
/// call once at startup before logging.
pub fn init(sink: Sink, ident: &'static std::ffi::CStr) {
    let _ = IDENT.set(ident.to_str().unwrap_or("agentd"));
    if sink == Sink::Syslog {
        // SAFETY: `ident` is 'static, as openlog requires (it keeps the
        // pointer); the flags are plain constants.
        unsafe {
            libc::openlog(
                ident.as_ptr(),
                libc::LOG_PID | libc::LOG_NDELAY,
                libc::LOG_DAEMON,
            )
        };
    }
    TO_SYSLOG.store(sink == Sink::Syslog, Ordering::Relaxed);
}

/// Sets the most verbose level that is still written.
pub fn set_level(level: Level) {
    MAX_LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn level() -> Level {
    Level::from_u8(MAX_LEVEL.load(Ordering::Relaxed))
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
}

/// Writes one line at `level` if enabled. Use the `log_*!` macros.
pub fn write(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = args.to_string();
    if TO_SYSLOG.load(Ordering::Relaxed) {
        // Interior NULs cannot come from our own format strings but may
        // come from interpolated config text: replace rather than drop.
        let c = CString::new(line.replace('\0', "\\0")).unwrap_or_default();
        // SAFETY: "%s" with one valid NUL-terminated string argument.
        unsafe { libc::syslog(level as libc::c_int, c"%s".as_ptr(), c.as_ptr()) };
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let _ = writeln!(
            std::io::stderr().lock(),
            "{} {}[{}]: {}",
            utc_timestamp(u64::try_from(now).unwrap_or(u64::MAX)),
            IDENT.get().copied().unwrap_or("agentd"),
            level.label(),
            line
        );
    }
}

/// `unix_ms` (milliseconds since 1970-01-01 UTC) as ISO 8601 UTC with
/// milliseconds, e.g. `2026-12-01T09:30:12.345Z`. Civil date from the day
/// count by Howard Hinnant's `civil_from_days` (proleptic Gregorian).
pub fn utc_timestamp(unix_ms: u64) -> String {
    let ms = unix_ms % 1000;
    let secs = unix_ms / 1000;
    let (days, sod) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (sod / 3600, sod % 3600 / 60, sod % 60);
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[macro_export]
macro_rules! log_error { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Error, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_warn { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Warn, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_notice { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Notice, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_info { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Info, format_args!($($t)*)) } }
#[macro_export]
macro_rules! log_debug { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Debug, format_args!($($t)*)) } }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uci_log_levels_parse() {
        assert_eq!(Level::parse("warning"), Some(Level::Warn));
        assert_eq!(Level::parse("debug"), Some(Level::Debug));
        assert_eq!(Level::parse("loud"), None);
    }

    #[test]
    fn timestamps_are_iso_8601_utc_with_milliseconds() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_timestamp(1_709_164_800_001), "2024-02-29T00:00:00.001Z");
        assert_eq!(utc_timestamp(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(utc_timestamp(4_102_444_800_000), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn more_severe_levels_pass_a_stricter_filter() {
        assert!(Level::Error < Level::Info);
    }
}
