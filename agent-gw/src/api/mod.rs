//! The SDK API's wire types: strict JSON decoding, the envelope, lease
//! requests and the error model (see `docs/sdk-api.md`).

pub mod envelope;
pub mod error;
pub mod fields;
pub mod handler_body;
pub mod json;
pub mod registration;
pub mod scan;
pub mod task_request;

pub use envelope::{DecodeError, Envelope};
pub use error::{ApiError, ErrorCode, Outcome};
