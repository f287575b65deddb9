//! `agentctl pki` as an operator runs it: the real binary, real files.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use router_pki::tls::DomainCa;
use router_pki::{identity, x509};
use serde_json::Value;

const AGENTCTL: &str = env!("CARGO_BIN_EXE_agentctl");

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("agentctl-pki-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs agentctl; returns (exit code, stdout, stderr).
fn agentctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(AGENTCTL).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_of(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = agentctl(&all);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} / {err}"));
    (code, v)
}

fn mode(p: &str) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// `pki issue-router` signing with `ca_key`/`ca_cert` for `router_id`, plus `rest`.
fn issue(ca_key: &str, ca_cert: &str, router_id: &str, rest: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "pki",
        "issue-router",
        "--ca-key",
        ca_key,
        "--ca-cert",
        ca_cert,
    ];
    args.extend_from_slice(&["--router-id", router_id]);
    args.extend_from_slice(rest);
    agentctl(&args)
}

/// [`issue`] with `--json`.
fn issue_json(ca_key: &str, ca_cert: &str, router_id: &str, rest: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(rest);
    let (code, out, err) = issue(ca_key, ca_cert, router_id, &all);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} / {err}"));
    (code, v)
}

/// `pki init-domain` for lab.example into `out`.
fn init_args(out: &str) -> [&str; 6] {
    [
        "pki",
        "init-domain",
        "--domain",
        "lab.example",
        "--out",
        out,
    ]
}

/// A domain CA in `dir/ca`.
fn init_domain(dir: &TempDir, domain: &str) -> (String, String) {
    let out = dir.path("ca");
    std::fs::create_dir_all(&out).unwrap();
    let (code, v) = json_of(&["pki", "init-domain", "--domain", domain, "--out", &out]);
    assert_eq!(code, 0, "{v}");
    (
        v["key_path"].as_str().unwrap().into(),
        v["cert_path"].as_str().unwrap().into(),
    )
}

#[test]
fn init_domain_writes_a_0600_key_and_a_ca_certificate_and_never_overwrites() {
    let dir = TempDir::new("init");
    let out = dir.path("ca");
    std::fs::create_dir_all(&out).unwrap();
    let (code, v) = json_of(&init_args(&out));
    assert_eq!(code, 0, "{v}");
    let (key_path, cert_path) = (dir.path("ca/domain-ca.key"), dir.path("ca/domain-ca.pem"));
    assert_eq!(v["key_path"], key_path.as_str());
    assert_eq!(mode(&key_path), 0o600);
    let key = identity::load_key(Path::new(&key_path)).unwrap();
    assert_eq!(
        v["fingerprint"],
        router_pki::fingerprint(&key.verifying_key())
    );
    let ca = DomainCa::load(Path::new(&cert_path), None).unwrap();
    assert_eq!(ca.name(), "lab.example");
    assert!(ca.summary().is_ca);

    let init_again = || agentctl(&init_args(&out));
    let before = (
        std::fs::read(&key_path).unwrap(),
        std::fs::read(&cert_path).unwrap(),
    );
    let (code, _, err) = init_again();
    assert_eq!(code, 1);
    assert!(err.contains("domain-ca.key: already exists"), "{err}");
    let after = (
        std::fs::read(&key_path).unwrap(),
        std::fs::read(&cert_path).unwrap(),
    );
    assert_eq!(before, after);
    // Only the certificate left: still refused, and no key is written.
    std::fs::remove_file(&key_path).unwrap();
    let (code, _, err) = init_again();
    assert_eq!(code, 1);
    assert!(err.contains("domain-ca.pem: already exists"), "{err}");
    assert!(!Path::new(&key_path).exists());
}

#[test]
fn issue_router_for_a_key_file_or_a_public_key() {
    let dir = TempDir::new("issue");
    let (ca_key, ca_cert) = init_domain(&dir, "lab.example");
    let id_path = dir.path("router-b.key");
    let router = router_pki::load_or_create_key(Path::new(&id_path)).unwrap();
    let out = dir.path("router-b.pem");
    let (code, v) = issue_json(
        &ca_key,
        &ca_cert,
        "router-b",
        &["--domain", "lab.example", "--key", &id_path, "--out", &out],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["dns_names"],
        serde_json::json!(["router-b", "router-b.lab.example"])
    );
    assert_eq!(
        v["fingerprint"],
        router_pki::fingerprint(&router.verifying_key())
    );
    let chain = router_pki::tls::load_cert_file(Path::new(&out)).unwrap();
    let s = x509::read(&chain[0]).unwrap();
    assert_eq!(
        s.key,
        x509::PublicKey::Ed25519(router.verifying_key().to_bytes())
    );
    let ca = DomainCa::load(Path::new(&ca_cert), Some("lab.example")).unwrap();
    ca.check(&chain, "router-b", SystemTime::now()).unwrap();
    // The identity key file is only read.
    assert_eq!(
        identity::load_key(Path::new(&id_path)).unwrap().to_bytes(),
        router.to_bytes()
    );

    // Same again: the output file is never replaced.
    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = issue(
        &ca_key,
        &ca_cert,
        "router-b",
        &["--key", &id_path, "--out", &out],
    );
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), before);

    // --pubkey, no --out: the PEM on stdout.
    let other = identity::generate_key().unwrap().verifying_key();
    let pubkey = identity::format_public_key(&other);
    let (code, pem, err) = issue(&ca_key, &ca_cert, "router-c", &["--pubkey", &pubkey]);
    assert_eq!(code, 0, "{err}");
    let der = router_pki::pem::decode_one(pem.as_bytes(), "CERTIFICATE", 16384).unwrap();
    let s = x509::read(&der).unwrap();
    assert_eq!(s.dns_names, ["router-c"]);
    assert_eq!(s.key, x509::PublicKey::Ed25519(other.to_bytes()));
}

#[test]
fn issue_router_refuses_a_ca_key_that_is_not_the_cas() {
    let dir = TempDir::new("wrongca");
    let (_, ca_cert) = init_domain(&dir, "lab.example");
    let stray = dir.path("stray.key");
    router_pki::load_or_create_key(Path::new(&stray)).unwrap();
    let pubkey = identity::format_public_key(&identity::generate_key().unwrap().verifying_key());
    let (code, v) = issue_json(&stray, &ca_cert, "router-b", &["--pubkey", &pubkey]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "invalid_certificate");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not the key of the CA certificate"),
        "{v}"
    );
}

#[test]
fn pki_usage_errors_exit_2() {
    for args in [
        &["pki"][..],
        &["pki", "frobnicate"],
        &["pki", "init-domain"],
        &["pki", "init-domain", "--domain", "lab..example"],
        &[
            "pki",
            "init-domain",
            "--domain",
            "lab.example",
            "--router-id",
            "x",
        ],
        &[
            "pki",
            "issue-router",
            "--ca-key",
            "k",
            "--ca-cert",
            "c",
            "--router-id",
            "r",
        ],
        &[
            "pki",
            "issue-router",
            "--key",
            "a",
            "--pubkey",
            "b",
            "--ca-key",
            "k",
            "--ca-cert",
            "c",
            "--router-id",
            "r",
        ],
        &["pki", "show", "--domain", "x"],
        &["status", "--router-id", "r"],
        &[
            "pki",
            "init-domain",
            "--domain",
            "lab.example",
            "--days",
            "0",
        ],
    ] {
        let (code, _, err) = agentctl(args);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

fn write_config(dir: &TempDir, extra: &str) -> String {
    let conf = dir.path("agentd.conf");
    let text = format!(
        "config agentd 'main'\n\toption router_id 'router-a'\n\toption domain 'lab.example'\n\toption identity '{}'\n{extra}",
        dir.path("etc/identity.key")
    );
    std::fs::write(&conf, text).unwrap();
    conf
}

#[test]
fn show_reports_and_creates_nothing() {
    let dir = TempDir::new("show-empty");
    let conf = write_config(
        &dir,
        "\nconfig peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n\toption key_fingerprint 'sha256:00'\n",
    );
    let (code, v) = json_of(&["--config", &conf, "pki", "show"]);
    assert_eq!(v["router_id"], "router-a");
    assert_eq!(v["identity"]["exists"], false);
    assert!(
        !Path::new(&dir.path("etc")).exists(),
        "show created the key directory"
    );
    // The peer's pin is malformed: the schema skips the section, show
    // says so, exit 1.
    assert_eq!(code, 1, "{v}");
    let problem = v["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("peer 'b': option 'key_fingerprint': expected a key fingerprint"),
        "{v}"
    );
}

#[test]
fn show_checks_the_router_certificate_against_key_and_ca() {
    let dir = TempDir::new("show-full");
    let (ca_key, ca_cert) = init_domain(&dir, "lab.example");
    let key = router_pki::load_or_create_key(Path::new(&dir.path("etc/identity.key"))).unwrap();
    let issue_for = |out: &str, pubkey: &str| {
        let (code, _, err) = issue(
            &ca_key,
            &ca_cert,
            "router-a",
            &["--pubkey", pubkey, "--out", out],
        );
        assert_eq!(code, 0, "{err}");
    };
    let good = dir.path("router-a.pem");
    issue_for(&good, &identity::format_public_key(&key.verifying_key()));
    let conf = write_config(
        &dir,
        &format!(
            "\toption domain_ca '{ca_cert}'\n\toption router_cert '{good}'\n\nconfig peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n"
        ),
    );
    let (code, v) = json_of(&["--config", &conf, "pki", "show"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["identity"]["fingerprint"],
        router_pki::fingerprint(&key.verifying_key())
    );
    assert_eq!(v["router_cert"]["matches_identity"], true);
    assert_eq!(v["router_cert"]["chains_to_domain_ca"], true);
    assert_eq!(v["router_cert"]["valid_for_router_id"], true);
    assert_eq!(v["peers"][0]["trust"], "domain_ca");
    let (code, text, _) = agentctl(&["--config", &conf, "pki", "show"]);
    assert_eq!(code, 0);
    assert!(text.contains("chains to domain_ca  yes"), "{text}");
    // A key others can read is a problem worth an exit 1.
    let key_path = dir.path("etc/identity.key");
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, v) = json_of(&["--config", &conf, "pki", "show"]);
    assert_eq!(code, 1);
    assert!(
        v["problems"][0]
            .as_str()
            .unwrap()
            .contains("readable by others"),
        "{v}"
    );
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A certificate of the domain for another key: found and reported.
    let wrong = dir.path("wrong.pem");
    issue_for(
        &wrong,
        &identity::format_public_key(&identity::generate_key().unwrap().verifying_key()),
    );
    let conf = write_config(
        &dir,
        &format!("\toption domain_ca '{ca_cert}'\n\toption router_cert '{wrong}'\n"),
    );
    let (code, v) = json_of(&["--config", &conf, "pki", "show"]);
    assert_eq!(code, 1);
    assert_eq!(v["router_cert"]["matches_identity"], false);
    assert!(
        v["problems"][0]
            .as_str()
            .unwrap()
            .contains("not the identity key"),
        "{v}"
    );
}
