"""The feed's shell files: shellcheck, the procd init scripts run under the
rc.common + procd.sh stand-ins (tests/openwrt-standins/, which record every
procd_* call), `reload` sending SIGHUP to a daemon this test started, and
the first-boot uci-defaults script on a stand-in root.

procd, rc.common and base-files are not packaged here; the stand-ins
implement only the documented interface the scripts use (see
tests/openwrt-standins/README.md)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from harness.poll import wait_for

REPO = Path(__file__).resolve().parents[1]
FEED = REPO / "openwrt-feed"
STANDINS = REPO / "tests" / "openwrt-standins"

# (installed name, feed file)
INIT_SCRIPTS = {
    "agentd": FEED / "agentd" / "files" / "agentd.init",
    "agent-gw": FEED / "agent-gw" / "files" / "agent-gw.init",
}

Call = Tuple[str, ...]


def shell_files() -> List[Path]:
    """Every shell file of the feed and the stand-ins: a `#!/bin/sh`
    first line or a `# shellcheck shell=sh` directive."""
    found = []
    for base in (FEED, STANDINS):
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.suffix in (".json", ".md", ".config", ".keep", ".pot", ".po", ".js"):
                continue
            head = path.read_bytes()[:200].decode("utf-8", "replace")
            if head.startswith("#!/bin/sh") or "# shellcheck shell=sh" in head:
                found.append(path)
    return found


def test_every_shell_file_passes_shellcheck() -> None:
    files = shell_files()
    names = {p.name for p in files}
    # The scan found the files it must (a broken scan checks nothing).
    for must in ("agentd.init", "agent-gw.init", "agentd.uci-defaults", "agentd.rpcd", "rc.common", "procd.sh", "functions.sh"):
        assert must in names, (must, names)
    exe = shutil.which("shellcheck")
    assert exe, "shellcheck is missing: `make test-python` installs Debian's shellcheck (or apt-get install shellcheck)"
    for path in files:
        p = subprocess.run([exe, "-s", "sh", str(path)], capture_output=True, timeout=60)
        assert p.returncode == 0, f"shellcheck -s sh {path}:\n{p.stdout.decode()}{p.stderr.decode()}"


def install_init(tmp: Path, name: str) -> Path:
    """The script as the package installs it: /etc/init.d/<name>."""
    dst = tmp / "etc" / "init.d" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(INIT_SCRIPTS[name], dst)
    dst.chmod(0o755)
    return dst


def run_rc(script: Path, action: str, log: Path, state: Path) -> List[Call]:
    """`/bin/sh rc.common SCRIPT ACTION` (what the script's
    `#!/bin/sh /etc/rc.common` line runs); returns the procd calls."""
    log.write_text("")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PROCD_LOG": str(log), "PROCD_STATE": str(state)}
    p = subprocess.run(
        ["/bin/sh", str(STANDINS / "rc.common"), str(script), action],
        capture_output=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    # Anything on stderr is a call the stand-ins (and so procd's documented
    # interface) do not know, or a shell error.
    assert p.returncode == 0 and p.stderr == b"", (action, p.returncode, p.stderr.decode())
    return [tuple(line.split("\t")) for line in log.read_text().splitlines()]


EXPECTED_START: Dict[str, List[Call]] = {
    "agentd": [
        ("procd_open_instance", "agentd"),
        ("procd_set_param", "command", "/usr/sbin/agentd", "--config", "/etc/config/agentd"),
        ("procd_set_param", "respawn"),
        ("procd_set_param", "stdout", "1"),
        ("procd_set_param", "stderr", "1"),
        ("procd_set_param", "file", "/etc/config/agentd"),
        ("procd_close_instance",),
        ("procd_add_reload_trigger", "agentd"),
        ("procd_close_service", "set"),
    ],
    "agent-gw": [
        ("procd_open_instance", "agent-gw"),
        ("procd_set_param", "command", "/usr/sbin/agent-gw", "--config", "/etc/config/agentd"),
        ("procd_set_param", "respawn"),
        ("procd_set_param", "stdout", "1"),
        ("procd_set_param", "stderr", "1"),
        ("procd_set_param", "file", "/etc/config/agentd"),
        ("procd_set_param", "user", "agent-gw"),
        ("procd_set_param", "group", "agent-gw"),
        ("procd_close_instance",),
        ("procd_add_reload_trigger", "agentd"),
        ("procd_close_service", "set"),
    ],
}


@pytest.mark.parametrize("name", sorted(INIT_SCRIPTS))
def test_init_script_declares_its_procd_instance(name: str, workdir: Path) -> None:
    script = install_init(workdir, name)
    calls = run_rc(script, "start", workdir / "procd.log", workdir)
    assert calls[0] == ("procd_open_service", name, str(script)), calls
    assert calls[1:] == EXPECTED_START[name], calls
    # No capabilities parameter: procd applies one only inside a ujail
    # jail, which these services do not use (feed README, "Privileges").
    assert not any(c[:2] == ("procd_set_param", "capabilities") for c in calls)
    assert run_rc(script, "stop", workdir / "procd.log", workdir) == [("procd_kill", name, "")]


def test_reload_sighups_agentd_and_redeclares_agent_gw(make_stack, workdir: Path) -> None:
    stack = make_stack()
    state = workdir / "procd-state"
    state.mkdir()
    # procd knows each instance's PID; the stand-in reads it from here.
    (state / "agentd.agentd.pid").write_text(f"{stack.agentd.pid}\n")
    (state / "agent-gw.agent-gw.pid").write_text(f"{stack.gw.pid}\n")

    before = stack.ctl_json("status")["config"]["generation"]
    calls = run_rc(install_init(workdir, "agentd"), "reload", workdir / "procd.log", state)
    assert calls == [("procd_send_signal", "agentd", "agentd", "HUP")], calls
    # agentd re-read its file: a new config generation, same process.
    wait_for(
        "agentd's config generation to move after SIGHUP",
        lambda: stack.ctl_json("status")["config"]["generation"] > before,
        timeout=10,
    )
    assert stack.agentd.alive()

    # agent-gw reads its config only at start: its reload declares the
    # instance again, with /etc/config/agentd as its `file` parameter, so
    # procd restarts it exactly when that file changed.
    script = install_init(workdir, "agent-gw")
    calls = run_rc(script, "reload", workdir / "procd.log", state)
    assert calls[0] == ("procd_open_service", "agent-gw", str(script)), calls
    assert calls[1:] == EXPECTED_START["agent-gw"], calls
    assert ("procd_set_param", "file", "/etc/config/agentd") in calls
    assert not any(c[0] == "procd_send_signal" for c in calls), calls


def stand_in_root(tmp: Path) -> Path:
    """A root with base-files' /etc/passwd, /etc/group and the
    functions.sh stand-in, and the shipped /etc/config/agentd with its
    identity key moved under this root."""
    root = tmp / "root"
    (root / "etc" / "config").mkdir(parents=True)
    (root / "lib").mkdir()
    shutil.copy(STANDINS / "root" / "lib" / "functions.sh", root / "lib" / "functions.sh")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/ash\nnobody:*:65534:65534:nobody:/var:/bin/false\n")
    (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    shipped = (FEED / "agentd" / "files" / "agentd.config").read_text()
    assert "'/etc/agentd/identity.key'" in shipped
    (root / "etc" / "config" / "agentd").write_text(shipped.replace("'/etc/agentd/identity.key'", f"'{root}/etc/agentd/identity.key'"))
    return root


def run_uci_defaults(root: Path, bins) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "IPKG_INSTROOT": str(root), "AGENTCTL": str(Path(bins.agentctl).absolute())}
    # /etc/init.d/boot and default_postinst source the script in a subshell
    # from its own directory; running it with sh is the same here.
    return subprocess.run(
        ["/bin/sh", str(FEED / "agentd" / "files" / "agentd.uci-defaults")],
        capture_output=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
        cwd=root,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the key to another group needs root (as at first boot)")
def test_first_boot_creates_the_gateway_user_and_a_key_it_can_read(bins, workdir: Path) -> None:
    root = stand_in_root(workdir)
    p = run_uci_defaults(root, bins)
    assert p.returncode == 0, p.stderr.decode()
    groups = [l for l in (root / "etc" / "group").read_text().splitlines() if l.startswith("agent-gw:")]
    users = [l for l in (root / "etc" / "passwd").read_text().splitlines() if l.startswith("agent-gw:")]
    assert groups == ["agent-gw:x:32768:"], groups
    assert len(users) == 1, users
    _, _, uid, gid, _, home, shell = users[0].split(":")
    assert (uid, gid, home, shell) == ("32768", "32768", "/var/run/agent-gw", "/bin/false"), users
    key = root / "etc" / "agentd" / "identity.key"
    st = key.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_gid == 32768 and st.st_uid == 0, oct(st.st_mode)
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o750 and key.parent.stat().st_gid == 32768
    first = key.read_bytes()
    assert b"PRIVATE KEY" in first

    # Run again (an interrupted first boot is retried): nothing duplicated,
    # the key untouched.
    p = run_uci_defaults(root, bins)
    assert p.returncode == 0, p.stderr.decode()
    for f in ("group", "passwd"):
        lines = (root / "etc" / f).read_text().splitlines()
        assert sum(l.startswith("agent-gw:") for l in lines) == 1, (f, lines)
    assert key.read_bytes() == first


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the key to another group needs root (as at first boot)")
def test_first_boot_never_rewrites_an_existing_key(bins, workdir: Path) -> None:
    root = stand_in_root(workdir)
    key = root / "etc" / "agentd" / "identity.key"
    made = subprocess.run([str(bins.agentctl), "--json", "pki", "init-identity", "--key", str(key)], capture_output=True, timeout=30)
    assert made.returncode == 0, made.stderr
    before = key.read_bytes()
    key.chmod(0o644)  # an operator's sloppy mode: the world loses access
    p = run_uci_defaults(root, bins)
    assert p.returncode == 0, p.stderr.decode()
    assert key.read_bytes() == before
    assert stat.S_IMODE(key.stat().st_mode) == 0o640


def test_first_boot_fails_and_is_retried_when_the_key_cannot_be_made(bins, workdir: Path) -> None:
    root = stand_in_root(workdir)
    # The key's directory is a file: the key cannot be created.
    (root / "etc" / "agentd").write_text("not a directory")
    p = run_uci_defaults(root, bins)
    # Non-zero: /etc/init.d/boot keeps the script and runs it next boot.
    assert p.returncode != 0
