//! Trusted-LAN bootstrap (`POST /agent/v1/bootstrap`) and the discovery
//! document of `GET /agent/v1/authentication`.
//!
//! A host on the LAN listener may ask for a short-lived token for a tenant
//! and origin. The token is signed by the router issuer key, lives at most
//! [`MAX_TTL_S`] seconds and carries the requester's source address in a
//! `src` claim, which [`Authenticator::verify`](super::Authenticator::verify)
//! checks against the connection's peer: a token lifted off one host is
//! useless from another. Only peers inside `bootstrap_networks` (the
//! trusted LAN; loopback and private ranges by default) may ask at all,
//! and only for a tenant the operator listed in `bootstrap_tenant`
//! (`default` alone unless configured): a LAN host must not be able to
//! mint itself a token of any tenant the mesh carries.
//! The wire shapes are those the Nexus SDK
//! (`RouterLanSessionProvider`, `RouterAuthMetadata`) expects.

use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::{json, Value};

use super::jwt::{self, Audience, Claims};
use super::{fill_random, AuthMode, Authenticator, Scope, Scopes, UnixSeconds};

/// Upper bound on bootstrap token lifetime (DESIGN §9).
pub const MAX_TTL_S: u64 = 300;
/// Largest accepted bootstrap request body.
pub const MAX_BODY: usize = 2048;
/// Path of the bootstrap endpoint, as advertised.
pub const ENDPOINT: &str = "/agent/v1/bootstrap";

#[derive(Deserialize)]
struct RawRequest {
    tenant: String,
    origin: String,
    #[serde(default)]
    scopes: Option<Vec<String>>,
}

/// Why a bootstrap request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapError {
    /// Bootstrap is off, or the gateway runs `auth 'none'`.
    Disabled,
    /// The peer is outside every `bootstrap_networks` entry.
    UntrustedSource(IpAddr),
    /// The tenant is not listed in `gateway.bootstrap_tenant`.
    TenantNotBootstrappable(String),
    TooLarge {
        len: usize,
        max: usize,
    },
    /// Not the expected JSON object (missing or duplicate fields).
    Json,
    BadTenant,
    /// `origin` is not `agent://<tenant>/<name>`.
    BadOrigin,
    /// A scope string we do not know.
    UnknownScope,
    /// The OS random source failed (no `jti` could be made).
    Random,
}

impl BootstrapError {
    /// Stable `reason` detail of a `forbidden` (docs/sdk-api.md).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            BootstrapError::Disabled => Some("bootstrap_disabled"),
            BootstrapError::UntrustedSource(_) => Some("bootstrap_untrusted_source"),
            BootstrapError::TenantNotBootstrappable(_) => Some("tenant_not_bootstrappable"),
            _ => None,
        }
    }
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootstrapError::Disabled => {
                f.write_str("trusted-LAN bootstrap is disabled on this router")
            }
            BootstrapError::UntrustedSource(ip) => write!(
                f,
                "bootstrap is only for trusted LAN sources; {} is not in gateway.bootstrap_networks",
                ip.to_canonical()
            ),
            BootstrapError::TenantNotBootstrappable(t) => write!(
                f,
                "trusted-LAN bootstrap does not issue tokens for tenant {t:?}: it is not listed in gateway.bootstrap_tenant"
            ),
            BootstrapError::TooLarge { len, max } => {
                write!(f, "bootstrap request is {len} bytes, limit {max}")
            }
            BootstrapError::Json => {
                f.write_str("bootstrap request must be {tenant, origin, scopes?}")
            }
            BootstrapError::BadTenant => f.write_str("bootstrap tenant is not a valid tenant name"),
            BootstrapError::BadOrigin => {
                f.write_str("bootstrap origin must be agent://<tenant>/<name>")
            }
            BootstrapError::UnknownScope => {
                f.write_str("bootstrap scopes must be agent.register/route/invoke")
            }
            BootstrapError::Random => f.write_str("random source unavailable"),
        }
    }
}

impl std::error::Error for BootstrapError {}

/// A decoded, validated bootstrap request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRequest {
    pub tenant: String,
    pub origin: String,
    pub scopes: Scopes,
}

impl BootstrapRequest {
    /// Decodes `{"tenant","origin","scopes":[...]}`; no scopes means all three.
    pub fn decode(body: &[u8]) -> Result<BootstrapRequest, BootstrapError> {
        if body.len() > MAX_BODY {
            return Err(BootstrapError::TooLarge {
                len: body.len(),
                max: MAX_BODY,
            });
        }
        let raw: RawRequest = serde_json::from_slice(body).map_err(|_| BootstrapError::Json)?;
        agentd::route::check_tenant(&raw.tenant).map_err(|_| BootstrapError::BadTenant)?;
        agentd::route::check_agent_uri(&raw.origin).map_err(|_| BootstrapError::BadOrigin)?;
        let in_tenant = raw
            .origin
            .strip_prefix("agent://")
            .and_then(|r| r.strip_prefix(raw.tenant.as_str()));
        if !in_tenant.is_some_and(|r| r.starts_with('/')) {
            return Err(BootstrapError::BadOrigin);
        }
        let scopes = match raw.scopes {
            None => Scope::ALL.into_iter().fold(Scopes::default(), Scopes::with),
            Some(list) => {
                let mut s = Scopes::default();
                for name in list.iter().take(8) {
                    s = s.with(Scope::parse(name.trim()).ok_or(BootstrapError::UnknownScope)?);
                }
                if list.len() > 8 || s.is_empty() {
                    return Err(BootstrapError::UnknownScope);
                }
                s
            }
        };
        Ok(BootstrapRequest {
            tenant: raw.tenant,
            origin: raw.origin,
            scopes,
        })
    }
}

/// A freshly issued bootstrap token.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub expires_in: u64,
    pub request: BootstrapRequest,
}

impl Issued {
    /// The reply body (`RouterLanSessionProvider._acquire` shape).
    pub fn to_json(&self) -> Value {
        json!({
            "access_token": self.token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": self.request.scopes.to_claim(),
            "identity": {"tenant": self.request.tenant, "origin": self.request.origin},
        })
    }
}

impl Authenticator {
    /// Whether `peer` may use bootstrap at all. The endpoint asks before
    /// reading the body, so an outside host learns nothing but `forbidden`.
    pub fn bootstrap_allowed(&self, peer: IpAddr) -> Result<(), BootstrapError> {
        let cfg = self.config();
        if !cfg.bootstrap || cfg.mode == AuthMode::None {
            return Err(BootstrapError::Disabled);
        }
        if !cfg.bootstrap_networks.iter().any(|n| n.contains(peer)) {
            return Err(BootstrapError::UntrustedSource(peer));
        }
        Ok(())
    }

    /// Whether bootstrap issues tokens for `tenant` at all
    /// (`gateway.bootstrap_tenant`).
    pub fn tenant_bootstrappable(&self, tenant: &str) -> Result<(), BootstrapError> {
        if self.config().bootstrap_tenants.iter().any(|t| t == tenant) {
            Ok(())
        } else {
            Err(BootstrapError::TenantNotBootstrappable(tenant.to_string()))
        }
    }

    /// Issues a source-bound token for a decoded bootstrap request from
    /// `peer` (checked again with [`Self::bootstrap_allowed`]) for a
    /// tenant listed in `bootstrap_tenant`.
    pub fn bootstrap(
        &self,
        request: BootstrapRequest,
        peer: IpAddr,
        now: UnixSeconds,
    ) -> Result<Issued, BootstrapError> {
        self.bootstrap_allowed(peer)?;
        self.tenant_bootstrappable(&request.tenant)?;
        let cfg = self.config();
        let ttl = cfg.bootstrap_ttl_s.clamp(1, MAX_TTL_S);
        let mut jti = [0u8; 16];
        fill_random(&mut jti).map_err(|_| BootstrapError::Random)?;
        let claims = Claims {
            iss: Some(cfg.issuer.clone()),
            sub: Some(request.origin.clone()),
            tenant: Some(request.tenant.clone()),
            scope: Some(request.scopes.to_claim()),
            aud: Some(Audience::One(cfg.audience.clone())),
            iat: Some(now.0),
            exp: Some(now.0 + ttl),
            nbf: None,
            jti: Some(crate::hex::encode(&jti)),
            src: Some(peer.to_canonical().to_string()),
        };
        let kid = super::key_id(&self.issuer_public_key());
        let token = jwt::mint(self.issuer_key(), Some(&kid), &claims);
        Ok(Issued {
            token,
            expires_in: ttl,
            request,
        })
    }

    /// The `GET /agent/v1/authentication` document (schema 2) as `peer`
    /// sees it: bootstrap is announced only to a source that may use it
    /// (the Nexus SDK bootstraps whenever `bootstrap` is present), with
    /// the tenants it issues tokens for; `bootstrap_access` tells every
    /// source in JWT mode whether it may bootstrap, and if not, why.
    pub fn metadata(&self, peer: IpAddr) -> Value {
        let cfg = self.config();
        let scopes = json!({
            "register": [Scope::Register.as_str()],
            "renew": [Scope::Register.as_str()],
            "unregister": [Scope::Register.as_str()],
            "route": [Scope::Route.as_str()],
            "invoke": [Scope::Invoke.as_str()],
        });
        match cfg.mode {
            AuthMode::None => json!({
                "schema_version": 2,
                "authentication": {"required": false, "type": "none"},
                "required_scopes": scopes,
            }),
            AuthMode::Jwt => {
                let mut doc = json!({
                    "schema_version": 2,
                    "authentication": {
                        "required": true,
                        "type": "oauth2",
                        "issuer": cfg.issuer,
                        "audience": cfg.audience,
                        "algorithms": ["EdDSA"],
                        "issuer_key": super::format_public_key(&self.issuer_public_key()),
                    },
                    "required_scopes": scopes,
                });
                match self.bootstrap_allowed(peer) {
                    Ok(()) => {
                        doc["bootstrap"] = json!({
                            "type": "trusted-lan",
                            "endpoint": ENDPOINT,
                            "token_ttl_seconds": cfg.bootstrap_ttl_s.clamp(1, MAX_TTL_S),
                            "tenants": cfg.bootstrap_tenants,
                        });
                        doc["bootstrap_access"] = json!({
                            "source": peer.to_canonical().to_string(),
                            "allowed": true,
                            "tenants": cfg.bootstrap_tenants,
                        });
                    }
                    Err(e) => {
                        doc["bootstrap_access"] = json!({
                            "source": peer.to_canonical().to_string(),
                            "allowed": false,
                            "reason": e.reason(),
                            "tenants": [],
                        });
                    }
                }
                doc
            }
        }
    }
}
