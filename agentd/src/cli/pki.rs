//! `agentctl pki`: set up a domain CA, issue router certificates, show
//! this router's identity. Local files only: no daemon is contacted.
//!
//! Nothing existing is ever overwritten (a CA key or certificate may
//! already be trusted by other routers); a refusal exits 1 naming the
//! file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use router_pki::cert::{self, CertError, Validity};
use router_pki::identity::{self, KeyFileError};
use router_pki::{x509, Fingerprint};
use serde_json::{json, Value};

use super::args::{Parser, UsageError};
use super::command::exit;
use super::run::{Failure, Output};

pub const CA_KEY_FILE: &str = "domain-ca.key";
pub const CA_CERT_FILE: &str = "domain-ca.pem";

/// Whose key a router certificate is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The router's identity key file (only its public half is used).
    KeyFile(PathBuf),
    /// `ed25519:BASE64`, as `pki show` prints it.
    PublicKey(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PkiCommand {
    InitDomain {
        domain: String,
        out: PathBuf,
        days: u32,
    },
    IssueRouter {
        ca_key: PathBuf,
        ca_cert: PathBuf,
        router_id: String,
        domain: Option<String>,
        subject: Subject,
        /// `None`: the PEM goes to stdout.
        out: Option<PathBuf>,
        days: u32,
    },
    Show,
    /// Create the identity key if missing (never rewritten); `group`
    /// makes it readable by the gateway's service group.
    InitIdentity {
        key: Option<PathBuf>,
        group: Option<String>,
    },
}

/// The `pki` options seen anywhere on the command line, checked against
/// the verb once it is known.
#[derive(Debug, Default)]
pub struct PkiOptions {
    domain: Option<String>,
    out: Option<PathBuf>,
    days: Option<u32>,
    ca_key: Option<PathBuf>,
    ca_cert: Option<PathBuf>,
    router_id: Option<String>,
    key: Option<PathBuf>,
    pubkey: Option<String>,
    group: Option<String>,
    /// The options given, as typed, for conflict messages.
    given: Vec<&'static str>,
}

impl PkiOptions {
    /// Takes `--name` if it is a pki option; `false` leaves it to the caller.
    pub fn take(&mut self, name: &str, p: &mut Parser) -> Result<bool, UsageError> {
        const FLAGS: [&str; 9] = [
            "--domain",
            "--out",
            "--days",
            "--ca-key",
            "--ca-cert",
            "--router-id",
            "--key",
            "--pubkey",
            "--group",
        ];
        let Some(flag) = FLAGS.into_iter().find(|f| f[2..] == *name) else {
            return Ok(false);
        };
        if flag == "--days" {
            let days: u32 = p.number()?;
            if days == 0 || days > 36500 {
                return Err(UsageError::BadValue {
                    option: flag.into(),
                    value: days.to_string(),
                    reason: "must be 1 to 36500",
                });
            }
            self.days = Some(days);
        } else {
            let v = p.value()?;
            match flag {
                "--domain" => self.domain = Some(v),
                "--out" => self.out = Some(v.into()),
                "--ca-key" => self.ca_key = Some(v.into()),
                "--ca-cert" => self.ca_cert = Some(v.into()),
                "--router-id" => self.router_id = Some(v),
                "--key" => self.key = Some(v.into()),
                "--group" => self.group = Some(v),
                _ => self.pubkey = Some(v),
            }
        }
        self.given.push(flag);
        Ok(true)
    }

    /// The first pki option given, for "not with this command" errors.
    pub fn first_given(&self) -> Option<&'static str> {
        self.given.first().copied()
    }

    fn only(&self, verb: &'static str, allowed: &[&str]) -> Result<(), UsageError> {
        match self.given.iter().find(|g| !allowed.contains(g)) {
            Some(g) => Err(UsageError::Conflict(g, verb)),
            None => Ok(()),
        }
    }

    /// The command for `pki VERB`.
    pub fn command(self, verb: Option<&str>) -> Result<PkiCommand, UsageError> {
        match verb {
            Some("init-domain") => {
                self.only("pki init-domain", &["--domain", "--out", "--days"])?;
                Ok(PkiCommand::InitDomain {
                    domain: self
                        .domain
                        .ok_or(UsageError::Missing("--domain for pki init-domain"))?,
                    out: self.out.unwrap_or_else(|| PathBuf::from(".")),
                    days: self.days.unwrap_or(cert::CA_DAYS),
                })
            }
            Some("issue-router") => {
                if self.group.is_some() {
                    return Err(UsageError::Conflict("--group", "pki issue-router"));
                }
                let subject = match (self.key, self.pubkey) {
                    (Some(k), None) => Subject::KeyFile(k),
                    (None, Some(p)) => Subject::PublicKey(p),
                    (Some(_), Some(_)) => return Err(UsageError::Conflict("--key", "--pubkey")),
                    (None, None) => {
                        return Err(UsageError::Missing(
                            "--key IDENTITY_KEY or --pubkey ed25519:B64 for pki issue-router",
                        ))
                    }
                };
                Ok(PkiCommand::IssueRouter {
                    ca_key: self
                        .ca_key
                        .ok_or(UsageError::Missing("--ca-key for pki issue-router"))?,
                    ca_cert: self
                        .ca_cert
                        .ok_or(UsageError::Missing("--ca-cert for pki issue-router"))?,
                    router_id: self
                        .router_id
                        .ok_or(UsageError::Missing("--router-id for pki issue-router"))?,
                    domain: self.domain,
                    subject,
                    out: self.out,
                    days: self.days.unwrap_or(cert::ROUTER_DAYS),
                })
            }
            Some("init-identity") => {
                self.only("pki init-identity", &["--key", "--group"])?;
                Ok(PkiCommand::InitIdentity {
                    key: self.key,
                    group: self.group,
                })
            }
            Some("show") => {
                self.only("pki show", &[])?;
                Ok(PkiCommand::Show)
            }
            Some(other) => Err(UsageError::UnexpectedArgument(other.to_string())),
            None => Err(UsageError::Missing(
                "pki verb (init-domain, issue-router, init-identity or show)",
            )),
        }
    }
}

/// A refused pki command (exit 1).
pub(super) fn refused(kind: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        code: exit::DAEMON_ERROR,
        kind,
        message: message.into(),
    }
}

pub(super) fn key_failure(e: KeyFileError) -> Failure {
    let kind = match e {
        KeyFileError::Exists(_) => "exists",
        KeyFileError::Format(_) => "invalid_key",
        KeyFileError::Io(..) => "io",
    };
    refused(kind, e.to_string())
}

fn cert_failure(e: CertError) -> Failure {
    match e {
        // A router_id or domain that cannot be a DNS name: a usage error.
        CertError::BadName { .. } => Failure {
            code: exit::USAGE,
            kind: "invalid_argument",
            message: e.to_string(),
        },
        _ => refused("invalid_certificate", e.to_string()),
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub(super) fn date(secs: i64) -> String {
    let ms = u64::try_from(secs).unwrap_or(0) * 1000;
    crate::log::utc_timestamp(ms).replace(".000Z", "Z")
}

/// Runs a pki command at `now`; `config` is agentctl's `--config`.
pub(super) fn run(
    cmd: &PkiCommand,
    config: Option<&Path>,
    now: SystemTime,
) -> Result<(Output, u8), Failure> {
    let done = |out| (out, exit::OK);
    match cmd {
        PkiCommand::InitDomain { domain, out, days } => {
            init_domain(domain, out, *days, now).map(done)
        }
        PkiCommand::IssueRouter {
            ca_key,
            ca_cert,
            router_id,
            domain,
            subject,
            out,
            days,
        } => {
            let key = match subject {
                Subject::KeyFile(p) => identity::load_key(p).map_err(key_failure)?.verifying_key(),
                Subject::PublicKey(s) => identity::parse_public_key(s)
                    .map_err(|e| refused("invalid_argument", format!("--pubkey: {e}")))?,
            };
            let req = Issue {
                ca_key,
                ca_cert,
                router_id,
                domain: domain.as_deref(),
                days: *days,
            };
            issue_router(&req, &key, out.as_deref(), now).map(done)
        }
        PkiCommand::Show => super::pki_show::show(config, now),
        PkiCommand::InitIdentity { key, group } => {
            let path = super::pki_identity::key_path(key.as_deref(), config);
            super::pki_identity::init_identity(&path, group.as_deref()).map(done)
        }
    }
}

fn exists_failure(path: &Path) -> Failure {
    refused(
        "exists",
        format!("{}: already exists (never overwritten)", path.display()),
    )
}

/// Creates `path` with `text` (mode `mode`), refusing an existing file.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), Failure> {
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            exists_failure(path)
        } else {
            refused("io", format!("{}: {e}", path.display()))
        }
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| {
            let _ = std::fs::remove_file(path);
            io(e)
        })
}

fn init_domain(domain: &str, out: &Path, days: u32, now: SystemTime) -> Result<Output, Failure> {
    let key_path = out.join(CA_KEY_FILE);
    let cert_path = out.join(CA_CERT_FILE);
    for p in [&key_path, &cert_path] {
        if std::fs::symlink_metadata(p).is_ok() {
            return Err(exists_failure(p));
        }
    }
    let key = identity::generate_key()
        .map_err(|e| refused("io", format!("no randomness for the key: {e}")))?;
    let der =
        cert::init_domain(domain, &key, Validity::days_from(now, days)).map_err(cert_failure)?;
    identity::create_key_file(&key_path, &key).map_err(key_failure)?;
    if let Err(f) = write_new(&cert_path, &cert::cert_pem(&der), 0o644) {
        // The key is ours (just created) and useless without its certificate.
        let _ = std::fs::remove_file(&key_path);
        return Err(f);
    }
    let s = x509::read(&der).map_err(|e| refused("invalid_certificate", e.to_string()))?;
    let fp = Fingerprint::of(&key.verifying_key());
    let text = format!(
        "domain CA for {domain}\n  key          {} (0600: keep it off the routers)\n  certificate  {}\n  subject      {}\n  fingerprint  {fp}\n  valid        {} to {}\n\nnext, for each router: agentctl pki issue-router --ca-key {} --ca-cert {} --router-id ROUTER_ID --domain {domain} --pubkey ed25519:... --out ROUTER_ID.pem\n(the router's ed25519 key: agentctl pki show on that router)\n",
        key_path.display(),
        cert_path.display(),
        s.subject,
        date(s.not_before),
        date(s.not_after),
        key_path.display(),
        cert_path.display(),
    );
    Ok(Output {
        text,
        json: json!({
            "domain": domain,
            "key_path": key_path.display().to_string(),
            "cert_path": cert_path.display().to_string(),
            "subject": s.subject.to_string(),
            "fingerprint": fp.to_string(),
            "not_before": date(s.not_before),
            "not_after": date(s.not_after),
        }),
    })
}

/// What `pki issue-router` signs with.
struct Issue<'a> {
    ca_key: &'a Path,
    ca_cert: &'a Path,
    router_id: &'a str,
    domain: Option<&'a str>,
    days: u32,
}

fn issue_router(
    req: &Issue<'_>,
    subject: &router_pki::VerifyingKey,
    out: Option<&Path>,
    now: SystemTime,
) -> Result<Output, Failure> {
    if let Some(p) = out.filter(|p| std::fs::symlink_metadata(p).is_ok()) {
        return Err(exists_failure(p));
    }
    let ca_key = identity::load_key(req.ca_key).map_err(key_failure)?;
    let ca = router_pki::tls::load_cert_file(req.ca_cert)
        .map_err(|e| refused("invalid_certificate", e.to_string()))?
        .swap_remove(0);
    let der = cert::issue_router(
        &ca_key,
        &ca,
        req.router_id,
        req.domain,
        subject,
        Validity::days_from(now, req.days),
    )
    .map_err(|e| {
        let mut f = cert_failure(e);
        f.message = format!("{} (CA {})", f.message, req.ca_cert.display());
        f
    })?;
    let pem = cert::cert_pem(&der);
    if let Some(p) = out {
        write_new(p, &pem, 0o644)?;
    }
    let s = x509::read(&der).map_err(|e| refused("invalid_certificate", e.to_string()))?;
    let fp = Fingerprint::of(subject);
    let mut json = json!({
        "router_id": req.router_id,
        "subject": s.subject.to_string(),
        "dns_names": s.dns_names,
        "issuer": s.issuer.to_string(),
        "fingerprint": fp.to_string(),
        "not_before": date(s.not_before),
        "not_after": date(s.not_after),
        "out": out.map(|p| p.display().to_string()),
    });
    let text = match out {
        Some(p) => format!(
            "router certificate for {} written to {}\n  key          {fp}\n  dns names    {}\n  issuer       {}\n  valid        {} to {}\n\non {}: copy it there and set agentd.router_cert to its path (agentd.domain_ca to {})\n",
            req.router_id,
            p.display(),
            s.dns_names.join(", "),
            s.issuer,
            date(s.not_before),
            date(s.not_after),
            req.router_id,
            req.ca_cert.display(),
        ),
        None => {
            json["certificate_pem"] = Value::from(pem.clone());
            pem
        }
    };
    Ok(Output { text, json })
}
