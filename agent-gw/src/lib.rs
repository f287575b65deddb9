//! agent-gw: the data plane of the agentd suite.
//!
//! Terminates HTTP, authenticates callers, decides on its own FIB replica
//! (no IPC round trip per request) and forwards invocations.
