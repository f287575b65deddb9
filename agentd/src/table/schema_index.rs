//! The capabilities that have a route whose contract carries an input
//! schema, with how many such routes each has.
//!
//! The gateway's protocol catalog (`gateway.expose_schemas`) lists and
//! finds tools by these names; with this index a listing costs the
//! schema-bearing capabilities and a call costs the routes of its one
//! capability, never a walk over the whole table.

use std::collections::BTreeMap;

use crate::route::Route;

#[derive(Debug, Default)]
pub(crate) struct SchemaIndex {
    /// Capability name → routes of it with an input schema (never 0).
    counts: BTreeMap<Box<str>, u32>,
}

fn has_schema(r: &Route) -> bool {
    r.contract
        .as_ref()
        .is_some_and(|c| c.input_schema.is_some())
}

impl SchemaIndex {
    /// Counts route `r` in (a route entering the table).
    pub fn add(&mut self, r: &Route) {
        if has_schema(r) {
            *self.counts.entry(r.capability.as_str().into()).or_default() += 1;
        }
    }

    /// Counts route `r` out (a route leaving the table, or its old
    /// version before an update).
    pub fn remove(&mut self, r: &Route) {
        if !has_schema(r) {
            return;
        }
        if let Some(n) = self.counts.get_mut(&*r.capability) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.counts.remove(&*r.capability);
            }
        }
    }

    /// The capability names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.counts.keys().map(|k| &**k)
    }
}
