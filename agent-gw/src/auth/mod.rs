//! Caller authentication: EdDSA bearer JWTs (RFC 8037) checked against
//! tenant keys and the router's own issuer key, and the `auth 'none'` lab
//! mode.
//!
//! The server calls [`Authenticator::authenticate`] once per request with
//! the `Authorization` header, the TCP peer address, the wall-clock time
//! and the scope the endpoint needs. What comes back decides the caller's
//! identity: [`Caller::identity`] returns the verified tenant and subject
//! and ignores whatever the request body claims, so payload fields never
//! grant anything (DESIGN §3).
//!
//! Tokens are decoded by [`jwt::decode`] (bounded, typed errors), then the
//! signature is verified with the key named by `kid` or, without one, by
//! the issuer/tenant claims; only then are time, lifetime, audience,
//! source binding and scope checked.

/// Bounded base64 (shared with the key file and PEM code in router-pki).
pub use router_pki::b64;
pub mod bootstrap;
pub mod cache;
pub mod jwt;
pub mod keys;
pub mod net;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use edkey::{SigningKey, VerifyingKey};

pub use jwt::{Alg, Claims, Malformed};
pub use keys::{fill_random, format_public_key, key_id, load_or_create_key, parse_public_key};

/// Wall-clock seconds since the Unix epoch. JWT `iat`/`exp` are absolute
/// times, so this is the one place agent-gw needs the real clock; the
/// caller reads it and passes it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnixSeconds(pub u64);

impl UnixSeconds {
    /// Reads the system clock (drivers only; logic takes the value).
    pub fn now() -> UnixSeconds {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        UnixSeconds(d.as_secs())
    }
}

/// An operation class a token must grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// register / renew / unregister.
    Register,
    /// route lookup.
    Route,
    /// invoke, invoke-stream and the task endpoints.
    Invoke,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Register, Scope::Route, Scope::Invoke];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Register => "agent.register",
            Scope::Route => "agent.route",
            Scope::Invoke => "agent.invoke",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|sc| sc.as_str() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Scope`]s; unknown scope strings in a token are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes(u8);

impl Scopes {
    pub fn parse(space_separated: &str) -> Scopes {
        Scopes(
            space_separated
                .split_ascii_whitespace()
                .filter_map(Scope::parse)
                .fold(0, |acc, s| acc | s.bit()),
        )
    }

    pub fn with(self, s: Scope) -> Scopes {
        Scopes(self.0 | s.bit())
    }

    pub fn contains(self, s: Scope) -> bool {
        self.0 & s.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Space-separated form, as the `scope` claim carries it.
    pub fn to_claim(self) -> String {
        Scope::ALL
            .into_iter()
            .filter(|s| self.contains(*s))
            .map(Scope::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `option auth` of the gateway section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Bearer JWTs required (the default).
    Jwt,
    /// Lab mode: every request is accepted as the tenant and source its
    /// body names. Never the default; the server warns at startup.
    None,
}

/// Verification settings (from the `gateway` section).
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// `iss` of tokens this router signs; also advertised as the issuer in
    /// `/agent/v1/authentication` (the Nexus SDK requires an https URL).
    pub issuer: String,
    /// The `aud` every token must name.
    pub audience: String,
    /// Tolerated clock difference for `iat`/`nbf`/`exp`, seconds.
    pub clock_skew_s: u64,
    /// Longest accepted `exp - iat`, seconds.
    pub max_lifetime_s: u64,
    /// Trusted-LAN bootstrap enabled.
    pub bootstrap: bool,
    /// Peers that may use bootstrap; others get 403 `forbidden`.
    pub bootstrap_networks: Vec<net::IpNet>,
    /// Lifetime of bootstrap tokens, clamped to 1..=300 s.
    pub bootstrap_ttl_s: u64,
    /// Tenants bootstrap issues tokens for (`gateway.bootstrap_tenant`);
    /// a request for another tenant gets 403 `tenant_not_bootstrappable`.
    pub bootstrap_tenants: Vec<String>,
}

impl AuthConfig {
    /// Defaults for router `router_id` of `domain` (may be empty): JWT
    /// mode, issuer `https://<router_id>.<domain>/agentd`, audience
    /// `agentd:<router_id>`; skew, maximum lifetime and bootstrap at their
    /// schema defaults (`gateway.clock_skew`, `max_token_lifetime`,
    /// `bootstrap`, `bootstrap_ttl`, `bootstrap_networks`,
    /// `bootstrap_tenant`).
    pub fn new(router_id: &str, domain: &str) -> AuthConfig {
        let host = if domain.is_empty() {
            router_id.to_string()
        } else {
            format!("{router_id}.{domain}")
        };
        let d = &uci_schema::Config::defaults().gateway;
        AuthConfig {
            mode: AuthMode::Jwt,
            issuer: format!("https://{host}/agentd"),
            audience: format!("agentd:{router_id}"),
            clock_skew_s: d.clock_skew,
            max_lifetime_s: d.max_token_lifetime,
            bootstrap: d.bootstrap,
            bootstrap_networks: net::default_bootstrap_networks(),
            bootstrap_ttl_s: d.bootstrap_ttl,
            bootstrap_tenants: d.bootstrap_tenant.clone(),
        }
    }
}

/// Whose key signed a token.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signer {
    /// The router's own issuer key (bootstrap tokens): any tenant.
    Router,
    /// A `tenant` section's `jwt_key`: only that tenant.
    Tenant(String),
}

/// Longest accepted tenant name / subject.
const MAX_NAME: usize = 128;

/// What a verified token proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedCaller {
    pub tenant: String,
    /// Agent URI `agent://tenant/name` (a bare `sub` is put under the tenant).
    pub subject: String,
    pub scopes: Scopes,
    pub token_id: Option<String>,
    /// `exp`, for callers that cache or report it.
    pub expires_at: UnixSeconds,
    /// The key that verified the signature (raw Ed25519 public key), for
    /// `agent` sections that pin an origin to a key.
    pub key: [u8; 32],
    /// A router-signed token bound to a source address (`src`): a
    /// trusted-LAN bootstrap token, whose identity is that address plus
    /// the subject.
    pub bootstrap: bool,
}

impl VerifiedCaller {
    /// What this token proves, for route ownership.
    pub fn proof(&self) -> agentd::owner::Proof {
        let subject = self.subject.as_str().into();
        if self.bootstrap {
            agentd::owner::Proof::Bootstrap { subject }
        } else {
            agentd::owner::Proof::Token {
                subject,
                key: self.key,
            }
        }
    }
}

/// The outcome of authentication for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Verified(VerifiedCaller),
    /// `auth 'none'`: identity comes from the request body.
    Unauthenticated,
}

/// A tenant and source agent the gateway acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    pub tenant: &'a str,
    pub subject: &'a str,
}

impl Caller {
    /// The identity to act for: the verified claims, overwriting what the
    /// body says; only in lab mode the body's own values.
    pub fn identity<'a>(&'a self, body_tenant: &'a str, body_source: &'a str) -> Identity<'a> {
        match self {
            Caller::Verified(v) => Identity {
                tenant: &v.tenant,
                subject: &v.subject,
            },
            Caller::Unauthenticated => Identity {
                tenant: body_tenant,
                subject: body_source,
            },
        }
    }

    pub fn verified(&self) -> Option<&VerifiedCaller> {
        match self {
            Caller::Verified(v) => Some(v),
            Caller::Unauthenticated => None,
        }
    }
}

/// Why a request was not authenticated (401) or not authorised (403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization: Bearer …` header.
    MissingToken,
    Malformed(Malformed),
    BadAlgorithm(Alg),
    /// `kid` (or the issuer/tenant claims) name no configured key.
    UnknownKey,
    BadSignature,
    Expired {
        exp: u64,
        now: u64,
    },
    NotYetValid {
        iat: u64,
        now: u64,
    },
    LifetimeTooLong {
        lifetime: u64,
        max: u64,
    },
    WrongAudience,
    /// A tenant key signed a token for another tenant, or `sub` lies
    /// outside the token's tenant.
    TenantMismatch,
    /// A source-bound (bootstrap) token presented from another address.
    WrongSource,
    /// Valid token without the scope this endpoint needs (403).
    MissingScope(Scope),
}

impl AuthError {
    /// Whether the caller proved an identity that lacks a permission (403
    /// `forbidden`) rather than failing to prove one (401
    /// `unauthenticated`); `From<AuthError> for ApiError` maps on this.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, AuthError::MissingScope(_))
    }

    /// The specific failed check, sent as the error's `reason` field.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::MissingToken => "token_required",
            AuthError::Malformed(_) => "token_malformed",
            AuthError::BadAlgorithm(_) => "token_bad_algorithm",
            AuthError::UnknownKey => "token_unknown_key",
            AuthError::BadSignature => "token_bad_signature",
            AuthError::Expired { .. } => "token_expired",
            AuthError::NotYetValid { .. } => "token_not_yet_valid",
            AuthError::LifetimeTooLong { .. } => "token_lifetime_too_long",
            AuthError::WrongAudience => "token_wrong_audience",
            AuthError::TenantMismatch => "token_tenant_mismatch",
            AuthError::WrongSource => "token_source_mismatch",
            AuthError::MissingScope(_) => "insufficient_scope",
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::MissingToken => f.write_str("a bearer token is required"),
            AuthError::Malformed(m) => write!(f, "malformed token: {m}"),
            AuthError::BadAlgorithm(a) => {
                write!(f, "token algorithm {a:?} refused; only EdDSA is accepted")
            }
            AuthError::UnknownKey => f.write_str("token is signed by no configured key"),
            AuthError::BadSignature => f.write_str("token signature does not verify"),
            AuthError::Expired { exp, now } => write!(f, "token expired at {exp} (now {now})"),
            AuthError::NotYetValid { iat, now } => {
                write!(f, "token is valid only from {iat} (now {now})")
            }
            AuthError::LifetimeTooLong { lifetime, max } => {
                write!(f, "token lifetime {lifetime} s exceeds the {max} s limit")
            }
            AuthError::WrongAudience => f.write_str("token is not issued for this router"),
            AuthError::TenantMismatch => {
                f.write_str("token tenant or subject is not the signing key's tenant")
            }
            AuthError::WrongSource => f.write_str("token is bound to another source address"),
            AuthError::MissingScope(s) => write!(f, "token lacks the {} scope", s.as_str()),
        }
    }
}

impl std::error::Error for AuthError {}

impl From<jwt::DecodeError> for AuthError {
    fn from(e: jwt::DecodeError) -> Self {
        match e {
            jwt::DecodeError::Malformed(m) => AuthError::Malformed(m),
            jwt::DecodeError::BadAlgorithm(a) => AuthError::BadAlgorithm(a),
        }
    }
}

/// Most keys tried for one token without a `kid` (per tenant).
pub const MAX_KEYS_PER_TENANT: usize = 8;

/// Verifies bearer tokens. Built once from config; cheap to share.
#[derive(Debug)]
pub struct Authenticator {
    config: AuthConfig,
    issuer_key: SigningKey,
    issuer_public: VerifyingKey,
    by_kid: HashMap<String, (Signer, VerifyingKey)>,
    by_tenant: HashMap<String, Vec<VerifyingKey>>,
    /// `RefCell`: the gateway is single-threaded (one current-thread
    /// runtime in a `LocalSet`), and no borrow spans an await.
    cache: std::cell::RefCell<cache::TokenCache>,
}

/// A configuration problem that keeps the authenticator from starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    TooManyKeys { tenant: String, max: usize },
    BadTenant(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::TooManyKeys { tenant, max } => {
                write!(f, "tenant {tenant}: more than {max} jwt_key values")
            }
            ConfigError::BadTenant(t) => write!(f, "tenant {t:?}: invalid tenant name"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Authenticator {
    /// `tenant_keys`: (tenant name, key) pairs from the `tenant` sections,
    /// already parsed with [`parse_public_key`].
    pub fn new(
        config: AuthConfig,
        issuer_key: SigningKey,
        tenant_keys: impl IntoIterator<Item = (String, VerifyingKey)>,
    ) -> Result<Authenticator, ConfigError> {
        let issuer_public = issuer_key.verifying_key();
        let mut by_kid = HashMap::new();
        let mut by_tenant: HashMap<String, Vec<VerifyingKey>> = HashMap::new();
        by_kid.insert(key_id(&issuer_public), (Signer::Router, issuer_public));
        for (tenant, key) in tenant_keys {
            if agentd::route::check_tenant(&tenant).is_err() {
                return Err(ConfigError::BadTenant(tenant));
            }
            let keys = by_tenant.entry(tenant.clone()).or_default();
            if keys.len() == MAX_KEYS_PER_TENANT {
                return Err(ConfigError::TooManyKeys {
                    tenant,
                    max: MAX_KEYS_PER_TENANT,
                });
            }
            keys.push(key);
            by_kid.insert(key_id(&key), (Signer::Tenant(tenant), key));
        }
        Ok(Authenticator {
            config,
            issuer_key,
            issuer_public,
            by_kid,
            by_tenant,
            cache: Default::default(),
        })
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    pub fn mode(&self) -> AuthMode {
        self.config.mode
    }

    /// The router issuer's public key, e.g. for `agentctl` to show.
    pub fn issuer_public_key(&self) -> VerifyingKey {
        self.issuer_public
    }

    pub(crate) fn issuer_key(&self) -> &SigningKey {
        &self.issuer_key
    }

    /// Authenticates one request from its `Authorization` header.
    pub fn authenticate(
        &self,
        headers: &http::HeaderMap,
        peer: IpAddr,
        now: UnixSeconds,
        required: Scope,
    ) -> Result<Caller, AuthError> {
        if self.config.mode == AuthMode::None {
            return Ok(Caller::Unauthenticated);
        }
        let value = headers
            .get(http::header::AUTHORIZATION)
            .ok_or(AuthError::MissingToken)?;
        let token = bearer(value.as_bytes()).ok_or(AuthError::MissingToken)?;
        let caller = self.verify(token, peer, now)?;
        if !caller.scopes.contains(required) {
            return Err(AuthError::MissingScope(required));
        }
        Ok(Caller::Verified(caller))
    }

    /// Verifies a raw compact token: signature first, then claims. A token
    /// verified before skips the signature and static claims (see
    /// [`cache`]); its time window and source binding are checked anew.
    pub fn verify(
        &self,
        token: &[u8],
        peer: IpAddr,
        now: UnixSeconds,
    ) -> Result<VerifiedCaller, AuthError> {
        let key = cache::key(token);
        let hit = self.cache.borrow().get(&key).cloned();
        let entry = match hit {
            Some(e) => e,
            None => {
                let e = self.verify_signed(token)?;
                self.cache.borrow_mut().insert(key, e.clone());
                e
            }
        };
        let skew = self.config.clock_skew_s;
        if entry.expires.saturating_add(skew) <= now.0 {
            return Err(AuthError::Expired {
                exp: entry.expires,
                now: now.0,
            });
        }
        if entry.not_before > now.0.saturating_add(skew) {
            return Err(AuthError::NotYetValid {
                iat: entry.not_before,
                now: now.0,
            });
        }
        if let Some(bound) = entry.source {
            if bound != peer.to_canonical() {
                return Err(AuthError::WrongSource);
            }
        }
        Ok(entry.caller)
    }

    /// The checks that do not depend on time or peer: signature, issuer
    /// and tenant binding, lifetime, audience, subject, `src` syntax.
    fn verify_signed(&self, token: &[u8]) -> Result<cache::Entry, AuthError> {
        let d = jwt::decode(token)?;
        let c = &d.claims;
        let tenant = c
            .tenant
            .as_deref()
            .ok_or(Malformed::MissingClaim("tenant"))?;
        let (signer, signing_key) = match &d.kid {
            Some(kid) => {
                let (signer, key) = self.by_kid.get(kid.as_str()).ok_or(AuthError::UnknownKey)?;
                key.verify_strict(d.signing_input, &d.signature)
                    .map_err(|_| AuthError::BadSignature)?;
                (signer.clone(), *key)
            }
            None if c.iss.as_deref() == Some(self.config.issuer.as_str()) => {
                self.issuer_public
                    .verify_strict(d.signing_input, &d.signature)
                    .map_err(|_| AuthError::BadSignature)?;
                (Signer::Router, self.issuer_public)
            }
            None => {
                let keys = self.by_tenant.get(tenant).ok_or(AuthError::UnknownKey)?;
                let key = keys
                    .iter()
                    .find(|k| k.verify_strict(d.signing_input, &d.signature).is_ok())
                    .ok_or(AuthError::BadSignature)?;
                (Signer::Tenant(tenant.to_string()), *key)
            }
        };
        // From here on the claims are the signer's word.
        if let Signer::Tenant(t) = &signer {
            if t != tenant {
                return Err(AuthError::TenantMismatch);
            }
        }
        let iat = c.iat.ok_or(Malformed::MissingClaim("iat"))?;
        let exp = c.exp.ok_or(Malformed::MissingClaim("exp"))?;
        if exp < iat {
            return Err(Malformed::ExpiresBeforeIssued.into());
        }
        let not_before = c.nbf.map_or(iat, |nbf| nbf.max(iat));
        if exp - iat > self.config.max_lifetime_s {
            return Err(AuthError::LifetimeTooLong {
                lifetime: exp - iat,
                max: self.config.max_lifetime_s,
            });
        }
        match &c.aud {
            Some(aud) if aud.contains(&self.config.audience) => {}
            _ => return Err(AuthError::WrongAudience),
        }
        if agentd::route::check_tenant(tenant).is_err() {
            return Err(AuthError::TenantMismatch);
        }
        let subject = subject_in_tenant(
            c.sub.as_deref().ok_or(Malformed::MissingClaim("sub"))?,
            tenant,
        )?;
        let source = match &c.src {
            Some(src) => Some(
                src.parse::<IpAddr>()
                    .map_err(|_| Malformed::BadSource)?
                    .to_canonical(),
            ),
            None => None,
        };
        let caller = VerifiedCaller {
            tenant: tenant.to_string(),
            subject,
            scopes: Scopes::parse(c.scope.as_deref().unwrap_or("")),
            token_id: c.jti.clone(),
            expires_at: UnixSeconds(exp),
            key: signing_key.to_bytes(),
            bootstrap: signer == Signer::Router && source.is_some(),
        };
        Ok(cache::Entry {
            caller,
            not_before,
            expires: exp,
            source,
        })
    }
}

/// Extracts the token from `Bearer <token>` (scheme case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// `sub` as an agent URI inside `tenant`: `agent://tenant/name` as is, a
/// bare `name` under the tenant, anything else refused.
fn subject_in_tenant(sub: &str, tenant: &str) -> Result<String, AuthError> {
    if sub.len() > MAX_NAME * 2 {
        return Err(Malformed::BadSubject.into());
    }
    let uri = if sub.contains("://") {
        sub.to_string()
    } else {
        format!("agent://{tenant}/{sub}")
    };
    if agentd::route::check_agent_uri(&uri).is_err() {
        return Err(Malformed::BadSubject.into());
    }
    let in_tenant = uri
        .strip_prefix("agent://")
        .and_then(|r| r.strip_prefix(tenant))
        .is_some_and(|r| r.starts_with('/'));
    if !in_tenant {
        return Err(AuthError::TenantMismatch);
    }
    Ok(uri)
}

impl From<Malformed> for AuthError {
    fn from(m: Malformed) -> Self {
        AuthError::Malformed(m)
    }
}

#[cfg(test)]
mod tests;
