//! The SDK API's wire types: strict JSON decoding, the envelope, lease
//! requests, the error model (see `docs/sdk-api.md`) and request bodies
//! read under a bound.

pub mod envelope;
pub mod error;
pub mod fields;
pub mod handler_body;
pub mod json;
pub mod registration;
pub mod request_body;
pub mod scan;
pub mod task_request;

pub use envelope::{DecodeError, Envelope};
pub use error::{ApiError, ErrorCode, Outcome};
