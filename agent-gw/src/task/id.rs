//! Task ids and access tokens: random, hex on the wire, tokens compared in
//! constant time.
//!
//! The id names a task (it appears in URLs and logs); the token is the
//! capability to read or cancel it and travels only in the
//! `X-Nexus-Task-Token` header. Both come from the kernel CSPRNG.

use std::fmt;

use crate::auth::fill_random;
use crate::hex;

/// A 128-bit random task id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId([u8; 16]);

impl TaskId {
    pub fn random() -> std::io::Result<TaskId> {
        let mut b = [0u8; 16];
        fill_random(&mut b)?;
        Ok(TaskId(b))
    }

    /// Parses the 32-hex-digit form used in URLs.
    pub fn parse(s: &str) -> Option<TaskId> {
        hex::decode::<16>(s.as_bytes()).map(TaskId)
    }

    pub fn from_bytes(b: [u8; 16]) -> TaskId {
        TaskId(b)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(&self.0))
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({self})")
    }
}

/// A 256-bit random access token. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct TaskToken([u8; 32]);

impl TaskToken {
    pub fn random() -> std::io::Result<TaskToken> {
        let mut b = [0u8; 32];
        fill_random(&mut b)?;
        Ok(TaskToken(b))
    }

    pub fn from_bytes(b: [u8; 32]) -> TaskToken {
        TaskToken(b)
    }

    /// The header value handed to the caller.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }

    /// Whether `presented` (the header value) is this token. Runs in time
    /// independent of where the first difference is, so the token cannot
    /// be guessed byte by byte from response timing.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let Some(other) = hex::decode::<32>(presented) else {
            return false;
        };
        let diff = self
            .0
            .iter()
            .zip(other.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        // black_box keeps the optimiser from turning the fold into an
        // early-exit comparison.
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Debug for TaskToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TaskToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_hex_and_differ() {
        let a = TaskId::random().unwrap();
        let b = TaskId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(TaskId::parse(&a.to_string()), Some(a));
        assert_eq!(TaskId::parse(&a.to_string().to_uppercase()), Some(a));
        assert_eq!(a.to_string().len(), 32);
        assert_eq!(TaskId::parse("xyz"), None);
        assert_eq!(TaskId::parse(&"g".repeat(32)), None);
    }

    #[test]
    fn tokens_match_only_themselves_and_never_print() {
        let t = TaskToken::random().unwrap();
        assert!(t.matches(t.to_hex().as_bytes()));
        let mut wrong = t.to_hex().into_bytes();
        wrong[63] = if wrong[63] == b'0' { b'1' } else { b'0' };
        assert!(!t.matches(&wrong));
        assert!(!t.matches(b""));
        assert!(!t.matches(&t.to_hex().as_bytes()[..62]));
        assert_eq!(format!("{t:?}"), "TaskToken(..)");
    }
}
