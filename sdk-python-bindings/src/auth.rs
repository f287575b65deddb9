//! Bearer tokens for the LAN SDK API.
//!
//! Three modes: no token (a router in `auth 'none'` lab mode, or one that
//! does not ask), a static token (`token=` / `AGENTD_TOKEN`), and the
//! trusted-LAN bootstrap the router may offer in `GET
//! /agent/v1/authentication`: `POST <endpoint> {tenant, origin, scopes}`
//! returns a token of at most 300 s bound to this agent, refreshed here
//! before it runs out. The lease keeper thread takes tokens from the same
//! source, so a bootstrap token never lapses under a renewing lease.

use std::sync::Mutex;
use std::time::Duration;

use agentd::time::Millis;

use crate::call::{CallError, Router};
use crate::wire::{bootstrap_offer, TokenGrant};

/// The scopes an agent asks for: it registers and it calls others.
pub const SCOPES: [&str; 3] = ["agent.register", "agent.route", "agent.invoke"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    None,
    Static(String),
    Bootstrap {
        endpoint: String,
        tenant: String,
        origin: String,
    },
}

#[derive(Debug)]
struct Cached {
    token: String,
    refresh_at: Millis,
}

#[derive(Debug)]
pub struct TokenSource {
    mode: Mode,
    cached: Mutex<Option<Cached>>,
}

/// When to refresh a token granted at `now` for `expires_in` seconds:
/// a fifth of its life (1–30 s) before it expires.
pub fn refresh_at(now: Millis, expires_in_s: u64) -> Millis {
    let life = expires_in_s.saturating_mul(1000);
    let margin = (life / 5).clamp(1_000.min(life), 30_000);
    now.saturating_add_ms(life - margin)
}

impl TokenSource {
    pub fn new(mode: Mode) -> Self {
        TokenSource {
            mode,
            cached: Mutex::new(None),
        }
    }

    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// Asks the router whether it offers trusted-LAN bootstrap; a router
    /// without the metadata endpoint (404) needs no token.
    pub fn discover(
        router: &Router,
        tenant: &str,
        origin: &str,
        timeout: Duration,
    ) -> Result<Mode, CallError> {
        let resp = match router.send_raw("GET", "/agent/v1/authentication", &[], b"", timeout, None)
        {
            Ok(r) => r,
            Err(CallError::Status { status: 404, .. }) => return Ok(Mode::None),
            Err(e) => return Err(e),
        };
        match bootstrap_offer(&resp.body).map_err(|e| CallError::Decode(e.to_string()))? {
            Some(offer) => Ok(Mode::Bootstrap {
                endpoint: offer.endpoint,
                tenant: tenant.to_string(),
                origin: origin.to_string(),
            }),
            None => Ok(Mode::None),
        }
    }

    /// The `Authorization` value to send, fetching a bootstrap token when
    /// none is cached or it is due for refresh.
    pub fn authorization(
        &self,
        router: &Router,
        now: Millis,
        timeout: Duration,
    ) -> Result<Option<String>, CallError> {
        match &self.mode {
            Mode::None => Ok(None),
            Mode::Static(t) => Ok(Some(format!("Bearer {t}"))),
            Mode::Bootstrap {
                endpoint,
                tenant,
                origin,
            } => {
                let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(c) = cached.as_ref().filter(|c| now < c.refresh_at) {
                    return Ok(Some(format!("Bearer {}", c.token)));
                }
                let body =
                    serde_json::json!({"tenant": tenant, "origin": origin, "scopes": SCOPES});
                let body =
                    serde_json::to_vec(&body).map_err(|e| CallError::Decode(e.to_string()))?;
                let resp = router.send_raw("POST", endpoint, &[], &body, timeout, None)?;
                let grant =
                    TokenGrant::decode(&resp.body).map_err(|e| CallError::Decode(e.to_string()))?;
                let header = format!("Bearer {}", grant.access_token);
                *cached = Some(Cached {
                    token: grant.access_token,
                    refresh_at: refresh_at(now, grant.expires_in),
                });
                Ok(Some(header))
            }
        }
    }

    /// Drops a cached token the router refused (401), so the next call
    /// fetches a fresh one. Returns whether a retry can help.
    pub fn invalidate(&self) -> bool {
        if matches!(self.mode, Mode::Bootstrap { .. }) {
            *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = None;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_refresh_a_fifth_of_their_life_early_within_bounds() {
        assert_eq!(refresh_at(Millis(0), 300), Millis(270_000));
        assert_eq!(refresh_at(Millis(0), 100), Millis(80_000));
        assert_eq!(refresh_at(Millis(10), 2), Millis(1_010));
        assert_eq!(refresh_at(Millis(0), 0), Millis(0));
    }

    #[test]
    fn only_bootstrap_tokens_can_be_invalidated() {
        assert!(!TokenSource::new(Mode::Static("t".into())).invalidate());
        assert!(!TokenSource::new(Mode::None).invalidate());
        let b = Mode::Bootstrap {
            endpoint: "/agent/v1/bootstrap".into(),
            tenant: "t".into(),
            origin: "o".into(),
        };
        assert!(TokenSource::new(b).invalidate());
    }
}
