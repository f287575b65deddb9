//! The peer data plane (calls between routers over HTTP/2 + mTLS, issue 8).
//!
//! * [`assertion`] — what a router signs when it forwards a call, and the
//!   receiver's checks with a bounded replay cache.

pub mod assertion;
