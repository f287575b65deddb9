//! Minimal HTTP/1.1 for the SDK: message heads, bodies, a blocking client.

pub mod body;
pub mod client;
pub mod head;
