//! The agentd daemon: one event loop owning all routing state.
pub mod log;
pub mod options;
pub mod probe;
