//! `lookup` requests: run the same selection the gateway runs on its FIB
//! replica and describe it with the shared IPC view.

use super::state::State;
use crate::ipc::message::{LookupQuery, LookupView};
use crate::select;
use crate::time::Millis;

pub fn lookup(state: &State, q: &LookupQuery, explain: bool, now: Millis) -> LookupView {
    let e = select::explain(state.table(), state.policy(), &q.as_query(), now);
    LookupView::of(&e, explain)
}
