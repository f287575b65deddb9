//! A small cache of verified tokens.
//!
//! An SDK sends the same bearer token with every call for minutes, and an
//! Ed25519 verification costs tens of microseconds — about as much as the
//! whole forwarding hop. Tokens whose signature and static claims checked
//! out are remembered by the SHA-256 of their bytes, with what the
//! per-request checks need: the validity window and the source binding
//! are re-checked on every hit (time and peer change; the signature and
//! the claims cannot). Bounded; the oldest entry goes first.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use edkey::Sha256;

use super::VerifiedCaller;

/// Tokens remembered at most.
pub const CAPACITY: usize = 256;

#[derive(Debug, Clone)]
pub struct Entry {
    pub caller: VerifiedCaller,
    /// `max(iat, nbf)`.
    pub not_before: u64,
    pub expires: u64,
    /// The `src` binding of a bootstrap token.
    pub source: Option<IpAddr>,
}

#[derive(Debug, Default)]
pub struct TokenCache {
    map: HashMap<[u8; 32], Entry>,
    order: VecDeque<[u8; 32]>,
}

/// Cache key of a token.
pub fn key(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token)
}

impl TokenCache {
    pub fn get(&self, key: &[u8; 32]) -> Option<&Entry> {
        self.map.get(key)
    }

    pub fn insert(&mut self, key: [u8; 32], entry: Entry) {
        if self.map.insert(key, entry).is_some() {
            return;
        }
        self.order.push_back(key);
        while self.order.len() > CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
