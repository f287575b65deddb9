//! The agentd suite as one executable, as busybox and dropbear's multi
//! build are on OpenWrt: `agentd`, `agent-gw` and `agentctl` are links to
//! it, and it runs the program its name says — or the one its first
//! argument names (`agentd-suite agent-gw --config …`). The daemons stay
//! separate processes with their own privileges (procd starts agent-gw as
//! its own user; agentd drops every capability but CAP_NET_ADMIN); what
//! they share is the file, so its text pages are in memory once.

use std::ffi::OsString;
use std::process::ExitCode;

#[cfg(target_pointer_width = "64")]
mod alloc;

/// mimalloc for the gateway, libc's malloc for agentd and agentctl
/// (`alloc` says why and how one binary holds both).
#[cfg(target_pointer_width = "64")]
#[global_allocator]
static ALLOC: alloc::SuiteAlloc = alloc::SuiteAlloc;

/// The programs, by the name they are called with.
const APPLETS: [&str; 3] = ["agentd", "agent-gw", "agentctl"];

/// What `agentd-suite --version` names: the suite itself, not a program.
const SUITE: &str = "agentd-suite";

const USAGE: &str = "\
usage: agentd-suite PROGRAM [ARGS...]   (or call it through a link named PROGRAM)
       agentd-suite --version

programs: agentd (routing daemon), agent-gw (invocation gateway), agentctl (control tool)
";

/// Which program `argv` asks for, and its arguments (after its name).
fn applet(argv: Vec<OsString>) -> Result<(&'static str, Vec<String>), String> {
    let mut args = argv.into_iter();
    let name = |s: &OsString| {
        let s = s.to_string_lossy();
        let base = s.rsplit('/').next().unwrap_or_default().to_string();
        APPLETS.iter().copied().find(|a| *a == base)
    };
    let program = args.next().unwrap_or_default();
    let rest = |args: std::vec::IntoIter<OsString>| -> Result<Vec<String>, String> {
        args.map(|a| {
            a.into_string()
                .map_err(|a| format!("argument {a:?} is not UTF-8"))
        })
        .collect()
    };
    if let Some(applet) = name(&program) {
        return Ok((applet, rest(args)?));
    }
    match args.next() {
        Some(first) if first == "--version" && args.len() == 0 => Ok((SUITE, Vec::new())),
        Some(first) => match name(&first) {
            Some(applet) if !first.to_string_lossy().contains('/') => Ok((applet, rest(args)?)),
            _ => Err(format!("unknown program {}", first.to_string_lossy())),
        },
        None => Err("no program named".to_string()),
    }
}

fn main() -> ExitCode {
    match applet(std::env::args_os().collect()) {
        Ok((SUITE, _)) => {
            println!("{SUITE} {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(("agentd", args)) => agentd::daemon::main_with(args),
        Ok(("agentctl", args)) => agentd::cli::run::main_with(args),
        Ok((_, args)) => {
            #[cfg(target_pointer_width = "64")]
            agent_gw::core::relief::set_release(alloc::release);
            agent_gw::program::main_with(args)
        }
        Err(e) => {
            eprintln!("agentd-suite: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_name_called_by_decides_else_the_first_argument() {
        let got = applet(argv(&["/usr/sbin/agent-gw", "--config", "x"])).unwrap();
        assert_eq!(
            got,
            ("agent-gw", vec!["--config".to_string(), "x".to_string()])
        );
        assert_eq!(applet(argv(&["agentctl", "status"])).unwrap().0, "agentctl");
        let got = applet(argv(&["./agentd-suite", "agentd", "--check-config", "f"])).unwrap();
        assert_eq!(got.0, "agentd");
        assert_eq!(got.1, ["--check-config", "f"]);
        // A link named agentd runs agentd even if its first argument
        // happens to name another program.
        assert_eq!(
            applet(argv(&["/usr/sbin/agentd", "agentctl"])).unwrap().0,
            "agentd"
        );
    }

    #[test]
    fn anything_else_is_refused_by_name() {
        assert!(applet(argv(&["agentd-suite"]))
            .unwrap_err()
            .contains("no program"));
        let e = applet(argv(&["agentd-suite", "sh"])).unwrap_err();
        assert!(e.contains("unknown program sh"), "{e}");
        // A path is not a program name.
        assert!(applet(argv(&["agentd-suite", "/bin/agentd"])).is_err());
        assert!(applet(argv(&[])).is_err());
    }

    #[test]
    fn the_suite_alone_answers_version_and_a_program_gets_it_passed_on() {
        assert_eq!(
            applet(argv(&["agentd-suite", "--version"])).unwrap(),
            (SUITE, vec![])
        );
        assert_eq!(
            applet(argv(&["/usr/sbin/agentctl", "--version"])).unwrap(),
            ("agentctl", vec!["--version".to_string()])
        );
        assert!(applet(argv(&["agentd-suite", "--version", "x"])).is_err());
    }
}
