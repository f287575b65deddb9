//! The SDK API front end: one function per endpoint of `docs/sdk-api.md`.
//! Each takes the request context, the request head and its (unread)
//! body, and answers a response or a typed `ApiError`; the server turns
//! errors into `{"error":{...}}` answers.

pub mod auth;
pub mod health;
pub mod invoke;
pub mod lease;
pub mod public_ipv6;
pub mod tasks;
