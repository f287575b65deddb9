//! What a protocol caller (MCP tool, A2A skill) may see and call.
//!
//! Two sources, both explicit (nothing is inferred from prompts or
//! descriptions): the `mapping` sections of the configuration, and — when
//! `gateway.expose_schemas` is 1 — the routes of the FIB replica whose
//! contract carries an input schema, each named after its capability (a
//! mapping of the same name wins).
//!
//! Visibility follows the caller's tenant and policy, decided with the
//! same selection code as a call (`agentd::select`) on the same replica:
//! an entry the policy denies to the caller, or whose routes all belong to
//! tenants the caller may not use, is not listed and cannot be called
//! (it reads as unknown). A mapping whose capability merely has no
//! eligible route right now (none registered, unhealthy, lease ended) is
//! still listed — the operator declared it — and its call fails typed.
//! An exposed schema is listed only while a route is usable.
//!
//! Lists are sorted by name and paginated with an opaque cursor (the last
//! name of the previous page, hex-encoded), so a page boundary survives
//! routes coming and going between calls.

use std::cell::Cell;
use std::collections::BTreeMap;

use agentd::select::{self, Query, Refusal, Reject};
use agentd::time::Millis;
use uci_schema::Protocol;

use crate::fib_sync::Fib;

/// One tool or skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub protocol: Protocol,
    /// Tool or skill name, unique per protocol.
    pub name: Box<str>,
    pub title: Option<Box<str>>,
    pub description: Option<Box<str>>,
    pub capability: Box<str>,
    pub version: u32,
    /// The input JSON Schema (a JSON object, as text); `None`: any object.
    pub input_schema: Option<Box<str>>,
    /// Declared by a `mapping` section (else exposed from a route).
    pub mapped: bool,
}

/// Who is asking: the verified (or lab-mode) identity of the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller<'a> {
    pub tenant: &'a str,
    /// Agent URI the call acts as.
    pub source: &'a str,
}

/// Whether `caller` may use an entry's capability now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visibility {
    /// A route is eligible.
    Usable,
    /// Listed, but no route is eligible now (its call fails typed).
    NoRoute,
    /// Not for this caller: policy denies it, or every route belongs to
    /// tenants (or sources) it may not use.
    Hidden,
}

/// One page of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Cursor of the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// A cursor this catalog did not issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCursor;

impl std::fmt::Display for BadCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid cursor: pass back the nextCursor of a previous page")
    }
}

impl std::error::Error for BadCursor {}

/// Longest cursor accepted (a hex-encoded name of at most 128 bytes plus
/// the prefix).
pub const MAX_CURSOR_LEN: usize = 2 * 128 + CURSOR_PREFIX.len();
const CURSOR_PREFIX: &str = "n1.";

/// The mappings of the configuration and the switch for exposed schemas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Enabled mappings, in configuration order.
    mappings: Vec<Entry>,
    expose_schemas: bool,
    /// Routes read to find exposed schemas, ever: what a listing or a
    /// call cost, so a test can tell a walk of the table from a lookup
    /// of the routes of one capability.
    examined: Cell<u64>,
}

impl Catalog {
    pub fn new(mappings: Vec<Entry>, expose_schemas: bool) -> Catalog {
        Catalog {
            mappings,
            expose_schemas,
            examined: Cell::new(0),
        }
    }

    /// Routes read for exposed schemas since the start.
    pub fn routes_examined(&self) -> u64 {
        self.examined.get()
    }

    /// Every entry `caller` may see, sorted by name, with its visibility.
    pub fn visible(
        &self,
        fib: &Fib,
        protocol: Protocol,
        caller: Caller<'_>,
        now: Millis,
    ) -> Vec<(Entry, Visibility)> {
        let mut out: BTreeMap<Box<str>, (Entry, Visibility)> = BTreeMap::new();
        if self.expose_schemas {
            for capability in fib.replica().table().schema_capabilities() {
                if let Some(e) = self.exposed(fib, protocol, caller, capability, now) {
                    out.insert(e.name.clone(), (e, Visibility::Usable));
                }
            }
        }
        for m in self.mappings.iter().filter(|m| m.protocol == protocol) {
            match visibility(fib, &m.capability, m.version, caller, now) {
                Visibility::Hidden => {
                    // A mapping shadows an exposed route of its name even
                    // when hidden: the operator chose what the name means.
                    out.remove(&m.name);
                }
                v => {
                    out.insert(m.name.clone(), (m.clone(), v));
                }
            }
        }
        out.into_values().collect()
    }

    /// One page of what `caller` may see, starting after `cursor`.
    pub fn list(
        &self,
        fib: &Fib,
        protocol: Protocol,
        caller: Caller<'_>,
        cursor: Option<&str>,
        page_size: usize,
        now: Millis,
    ) -> Result<Page, BadCursor> {
        let after = cursor.map(decode_cursor).transpose()?;
        let all = self.visible(fib, protocol, caller, now);
        let start = match &after {
            None => 0,
            Some(a) => all.partition_point(|(e, _)| *e.name <= **a),
        };
        let page_size = page_size.max(1);
        let rest = &all[start..];
        let entries: Vec<Entry> = rest
            .iter()
            .take(page_size)
            .map(|(e, _)| e.clone())
            .collect();
        let next_cursor = (rest.len() > page_size)
            .then(|| entries.last().map(|e| encode_cursor(&e.name)))
            .flatten();
        Ok(Page {
            entries,
            next_cursor,
        })
    }

    /// The entry `name` as `caller` sees it; `None` when it does not
    /// exist for this caller (unknown, or hidden from it).
    pub fn find(
        &self,
        fib: &Fib,
        protocol: Protocol,
        caller: Caller<'_>,
        name: &str,
        now: Millis,
    ) -> Option<(Entry, Visibility)> {
        if let Some(m) = self
            .mappings
            .iter()
            .find(|m| m.protocol == protocol && *m.name == *name)
        {
            return match visibility(fib, &m.capability, m.version, caller, now) {
                Visibility::Hidden => None,
                v => Some((m.clone(), v)),
            };
        }
        if !self.expose_schemas {
            return None;
        }
        self.exposed(fib, protocol, caller, name, now)
            .map(|e| (e, Visibility::Usable))
    }

    /// The exposed entry of `capability`: its highest version that has a
    /// route with an input schema and is usable by `caller`. Reads only
    /// that capability's routes (the table indexes them by name).
    fn exposed(
        &self,
        fib: &Fib,
        protocol: Protocol,
        caller: Caller<'_>,
        capability: &str,
        now: Millis,
    ) -> Option<Entry> {
        // Per version, the first route (in table order) with a schema.
        let mut by_version: BTreeMap<u32, &agentd::route::Route> = BTreeMap::new();
        let mut read = 0u64;
        for r in fib.replica().table().routes_of(capability) {
            read += 1;
            if r.contract
                .as_ref()
                .is_some_and(|c| c.input_schema.is_some())
            {
                by_version.entry(r.version).or_insert(r);
            }
        }
        self.examined.set(self.examined.get().saturating_add(read));
        let (version, r) = by_version
            .into_iter()
            .rev()
            .find(|(v, _)| visibility(fib, capability, *v, caller, now) == Visibility::Usable)?;
        let contract = r.contract.as_ref()?;
        Some(Entry {
            protocol,
            name: r.capability.as_str().into(),
            title: None,
            description: contract.description.clone(),
            capability: r.capability.as_str().into(),
            version,
            input_schema: contract.input_schema.clone(),
            mapped: false,
        })
    }
}

/// Whether `caller` may use `capability` v`version` now.
pub fn visibility(
    fib: &Fib,
    capability: &str,
    version: u32,
    caller: Caller<'_>,
    now: Millis,
) -> Visibility {
    let replica = fib.replica();
    if replica.generation().is_none() {
        // No FIB yet: nothing is known to be denied; the call says why it
        // cannot be routed.
        return Visibility::NoRoute;
    }
    let q = Query {
        capability,
        version,
        tenant: caller.tenant,
        source: Some(caller.source),
        target_agent: None,
    };
    match select::select(replica.table(), replica.policy(), &q, now) {
        Ok(_) => Visibility::Usable,
        Err(Refusal::Denied(_)) => Visibility::Hidden,
        // The furthest filter any route reached: none got past tenant
        // access (every route is another tenant's), or past the source
        // check.
        Err(Refusal::NoRoute(Reject::TenantAccess | Reject::SourceNotPermitted)) => {
            Visibility::Hidden
        }
        Err(Refusal::NoRoute(_)) => Visibility::NoRoute,
    }
}

/// The cursor of the page after `name` (public for the fuzz target).
pub fn encode_cursor(name: &str) -> String {
    let mut s = String::with_capacity(CURSOR_PREFIX.len() + 2 * name.len());
    s.push_str(CURSOR_PREFIX);
    for b in name.bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The name a cursor of [`encode_cursor`] continues after.
pub fn decode_cursor(c: &str) -> Result<String, BadCursor> {
    let hex = c
        .strip_prefix(CURSOR_PREFIX)
        .filter(|h| c.len() <= MAX_CURSOR_LEN && h.len() % 2 == 0 && !h.is_empty())
        .ok_or(BadCursor)?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes.ok_or(BadCursor)?).map_err(|_| BadCursor)
}

#[cfg(test)]
mod tests;
