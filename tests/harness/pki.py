"""A domain CA and router certificates made with `agentctl pki` (the
admin tool operators use), for the tests of CA-mode trust."""

from __future__ import annotations

import subprocess
from pathlib import Path

DOMAIN = "lab.example"


def pki(bins, *args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([str(bins.agentctl), "pki", *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=20)
    assert p.returncode == 0, f"agentctl pki {' '.join(args)}: {p.stderr.decode(errors='replace')}"
    return p


def domain_ca(bins, dir: Path, domain: str) -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    pki(bins, "init-domain", "--domain", domain, "--out", str(dir))
    return dir


def issue(bins, ca_dir: Path, router, router_id: str, domain: str) -> Path:
    out = router.dir / "router.pem"
    if out.exists():
        out.unlink()
    pki(bins, "issue-router", "--ca-key", str(ca_dir / "domain-ca.key"), "--ca-cert", str(ca_dir / "domain-ca.pem"),
        "--router-id", router_id, "--domain", domain, "--key", str(router.dir / "identity.key"), "--out", str(out))
    return out


def use_ca(router, ca_dir: Path, cert: Path, domain: str = DOMAIN) -> None:
    main = router.cfg.section("agentd").options
    main["domain"] = domain
    main["domain_ca"] = str(ca_dir / "domain-ca.pem")
    main["router_cert"] = str(cert)
