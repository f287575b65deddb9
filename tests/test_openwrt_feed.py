"""The OpenWrt feed's package definitions and shipped files, checked where
no OpenWrt SDK runs: versions apk accepts, the rust-package.mk / luci.mk
wiring, every installed file present, the default config passing the real
`agentd --check-config`, and the capabilities file in procd's format
(jail/capabilities.c: an object of five arrays of capability names)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Dict

import pytest

REPO = Path(__file__).resolve().parents[1]
FEED = REPO / "openwrt-feed"
PACKAGES = ["agentd", "agent-gw", "luci-app-agentd"]

# Linux capability names (include/uapi/linux/capability.h), as procd's
# capabilities-names.h spells them.
LINUX_CAPS = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
    "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
    "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
    "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
}


def make_vars(text: str) -> Dict[str, str]:
    """`NAME:=value` lines of a package Makefile (no expansion)."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^([A-Z_]+)[ \t]*:?=[ \t]*(.*)$", text, re.M)}


def workspace_version() -> str:
    m = re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M | re.S)
    assert m, "no [workspace.package] version in Cargo.toml"
    return m.group(1)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_package_versions_are_what_apk_and_opkg_accept(pkg: str) -> None:
    v = make_vars((FEED / pkg / "Makefile").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", v["PKG_VERSION"]), v["PKG_VERSION"]
    assert v["PKG_VERSION"] == workspace_version()
    assert re.fullmatch(r"\d+", v["PKG_RELEASE"]), v["PKG_RELEASE"]


def test_the_suite_is_one_binary_installed_once_with_links() -> None:
    """agentd's package builds the multi-call binary and installs it as
    /usr/sbin/agentd with agentctl a link to it; agent-gw's package builds
    nothing, depends on agentd and installs a link named agent-gw."""
    agentd = (FEED / "agentd" / "Makefile").read_text()
    assert "$(PKG_INSTALL_DIR)/bin/agentd-suite $(1)/usr/sbin/agentd" in agentd
    assert "$(LN) ../sbin/agentd $(1)/usr/bin/agentctl" in agentd
    gw = (FEED / "agent-gw" / "Makefile").read_text()
    assert "$(LN) agentd $(1)/usr/sbin/agent-gw" in gw
    depends = re.search(r"^\s*DEPENDS:=(.*)$", gw, re.M)
    assert depends and "+agentd" in depends.group(1).split(), depends
    assert "Build/Compile/Cargo" not in gw and "PKG_INSTALL_DIR" not in gw


@pytest.mark.parametrize("pkg,crate,bins", [("agentd", "suite", {"agentd-suite"})])
def test_rust_packages_build_their_workspace_member_with_rust_package_mk(pkg: str, crate: str, bins: set) -> None:
    text = (FEED / pkg / "Makefile").read_text()
    v = make_vars(text)
    assert v["PKG_BUILD_DEPENDS"] == "rust/host"
    assert "include $(TOPDIR)/feeds/packages/lang/rust/rust-package.mk" in text.splitlines()
    assert "$(RUST_ARCH_DEPENDS)" in text
    m = re.search(r"\$\(call Build/Compile/Cargo,([^)]+)\)", text)
    assert m and m.group(1) == crate, m
    # The member exists and builds the binaries the package installs.
    manifest = (REPO / crate / "Cargo.toml").read_text()
    built = set(re.findall(r'^\[\[bin\]\]\s*\nname\s*=\s*"([^"]+)"', manifest, re.M)) or {crate}
    assert bins <= built, (bins, built)
    installed = set(re.findall(r"\$\(PKG_INSTALL_DIR\)/bin/([\w-]+)", text))
    assert installed == bins, installed
    # Every file installed from files/ is in the feed.
    for f in re.findall(r"\./files/([\w.-]+)", text):
        assert (FEED / pkg / "files" / f).is_file(), f"{pkg}: files/{f} missing"


def test_agentd_package_ships_its_config_as_a_conffile() -> None:
    text = (FEED / "agentd" / "Makefile").read_text()
    conffiles = re.search(r"define Package/agentd/conffiles\n(.*?)endef", text, re.S)
    assert conffiles and conffiles.group(1).split() == ["/etc/config/agentd"], conffiles
    assert "./files/agentd.config $(1)/etc/config/agentd" in text
    assert "./files/agentd.rpcd $(1)/usr/libexec/rpcd/agentd" in text
    assert "./files/agentd.init $(1)/etc/init.d/agentd" in text
    assert "./files/agentd.uci-defaults $(1)/etc/uci-defaults/" in text
    assert (FEED / "agentd" / "files" / "agentd.keep").read_text().split() == ["/etc/agentd/"]


def test_luci_package_uses_luci_mk() -> None:
    text = (FEED / "luci-app-agentd" / "Makefile").read_text()
    assert "include $(TOPDIR)/feeds/luci/luci.mk" in text.splitlines()
    v = make_vars(text)
    assert "+agentd" in v["LUCI_DEPENDS"].split() and v["LUCI_PKGARCH"] == "all"


def scanned_packages(feed_dir: Path) -> Dict[str, Path]:
    """What `scripts/feeds update` indexes in a feed directory: OpenWrt's
    include/scan.mk runs `find -L $(SCAN_DIR) -mindepth 1 -maxdepth 5 -name
    Makefile` (SCAN_DEPTH=5 from scripts/feeds), keeps the Makefiles that
    match `call (Build/DefaultTargets|BuildPackage|KernelPackage)`, and
    `feeds install` links the directory, which make enters with `-C` (so
    CURDIR is its resolved path). Package directory name -> resolved dir."""
    found = subprocess.run(["find", "-L", str(feed_dir), "-mindepth", "1", "-maxdepth", "5", "-name", "Makefile"],
                           capture_output=True, text=True, check=True).stdout.split()
    # A clone holds only what git tracks (not this checkout's target/ or .venv/).
    ls = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True)
    if ls.returncode == 0:
        tracked = set(ls.stdout.split())
        found = [mk for mk in found if Path(mk).relative_to(REPO).as_posix() in tracked]
    out: Dict[str, Path] = {}
    for mk in sorted(found):
        text = Path(mk).read_text(errors="replace")
        if re.search(r"call (Build/DefaultTargets|BuildPackage|KernelPackage)", text):
            pkg_dir = Path(mk).parent
            assert pkg_dir.name not in out, f"{pkg_dir.name} indexed twice: {out[pkg_dir.name]} and {pkg_dir}"
            out[pkg_dir.name] = pkg_dir.resolve()
    return out


@pytest.mark.parametrize("feed_dir", [FEED, REPO], ids=["src-link openwrt-feed", "src-git whole repository"])
def test_scripts_feeds_finds_the_three_packages_and_luci_mk_finds_the_app(feed_dir: Path) -> None:
    """A `src-link` feed (the feed directory) and a `src-git` clone (the
    whole repository) index exactly the three packages, and the LuCI
    package's directory gives luci.mk everything it reads from the
    top-level luci-app/: ./htdocs and ./root for Build/Prepare, ./po for
    the translations, the package name from the directory's own name
    (LUCI_NAME ?= $(notdir $(CURDIR)))."""
    pkgs = scanned_packages(feed_dir)
    assert sorted(pkgs) == sorted(PACKAGES), pkgs
    luci = pkgs["luci-app-agentd"]
    assert luci.name == "luci-app-agentd", luci
    app = REPO / "luci-app"
    for d in ("htdocs", "root", "po"):
        assert (luci / d).resolve() == app / d, (d, (luci / d).resolve())
    assert (luci / "htdocs" / "luci-static" / "resources" / "view" / "agentd" / "settings.js").is_file()
    assert (luci / "root" / "usr" / "share" / "rpcd" / "acl.d" / "luci-app-agentd.json").is_file()
    assert (luci / "po" / "templates" / "agentd.pot").is_file()
    # The Rust packages build from the checkout two levels up.
    for rust in ("agentd", "agent-gw"):
        assert pkgs[rust].parents[1] == REPO.resolve(), pkgs[rust]


def test_shipped_default_config_passes_check_config(bins) -> None:
    cfg = FEED / "agentd" / "files" / "agentd.config"
    p = subprocess.run([str(bins.agentd), "--check-config", str(cfg)], capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout.decode().strip() == "OK", (p.stdout, p.stderr)


def test_capabilities_file_is_in_procds_format_and_grants_only_net_admin() -> None:
    caps = json.loads((FEED / "agentd" / "files" / "agentd.capabilities.json").read_text())
    assert set(caps) == {"bounding", "effective", "inheritable", "permitted", "ambient"}, caps
    for key, names in caps.items():
        assert isinstance(names, list) and all(n in LINUX_CAPS for n in names), (key, names)
    for key in ("bounding", "effective", "permitted"):
        assert caps[key] == ["CAP_NET_ADMIN"], (key, caps[key])
    assert caps["inheritable"] == [] and caps["ambient"] == []
