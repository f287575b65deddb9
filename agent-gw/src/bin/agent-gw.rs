//! `agent-gw --config FILE [-f] [--socket PATH] [--listen ADDR]`: the
//! invocation gateway daemon on its own (`agent_gw::program`).

/// mimalloc for small blocks, not the libc allocator: every call
/// allocates headers, frames and buffers, and musl's malloc (OpenWrt's)
/// made that a quarter of the data path's CPU (see agent-gw/Cargo.toml for
/// the figures and why 64-bit targets only); large blocks from libc's
/// malloc (`agent_gw::core::heap` says why).
#[cfg(target_pointer_width = "64")]
#[global_allocator]
static ALLOC: agent_gw::core::heap::GatewayHeap = agent_gw::core::heap::GatewayHeap;

fn main() -> std::process::ExitCode {
    #[cfg(target_pointer_width = "64")]
    agent_gw::core::relief::set_release(agent_gw::core::heap::release);
    agent_gw::program::main()
}
