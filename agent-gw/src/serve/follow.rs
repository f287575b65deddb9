//! Follows the FIB's links: every change of the established peer set
//! (agentd's ARPX sessions) is applied to the data plane at once —
//! trust, outbound connections, inbound connections to close. Event
//! driven: it sleeps until `fib_sync` says the link set changed.

use std::rc::Rc;

use crate::core::Core;
use crate::peer::Link;

pub async fn run(state: Rc<Core>) {
    let mut tunnels = super::relay::Keepers::default();
    loop {
        let links: Vec<Link> = state
            .fib
            .borrow()
            .links()
            .map(|l| Link {
                router_id: l.router_id.clone(),
                key: l.key,
                data: l.data.clone(),
                signed: l.signed,
                relay: l.relay,
            })
            .collect();
        state.peer.sync(links.clone());
        tunnels.sync(&state, &links);
        state.links_changed.notified().await;
    }
}
