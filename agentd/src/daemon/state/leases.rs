//! Leases of local agents: register, renew, unregister, flush. Each is
//! checked like the others (ownership, pins, endpoint scope, origin
//! claims mesh-wide) before the table changes, and answered with the
//! grant and the FIB changes to publish.

use super::*;

impl State {
    pub(super) fn register(
        &mut self,
        reg: Registration,
        now: Millis,
    ) -> (Result<ResponseBody, IpcError>, Changes) {
        lease_reply(self.try_register(reg, now))
    }

    fn try_register(
        &mut self,
        reg: Registration,
        now: Millis,
    ) -> Result<(LeaseGrant, Option<Route>), IpcError> {
        reg.validate()?;
        let wants_ipv6 = reg.public_ipv6;
        self.may_act(&reg.origin, reg.caller.as_ref())?;
        // How this registration proves its origin: a caller's credential,
        // or (an administrator, the gateway handing routes back) the
        // owner it names. Only a proven claim may stand next to another
        // router's.
        let claim = match &reg.caller {
            Some(c) => c.origin_proof(),
            None => OriginProof::of_local(RouteSource::Local, reg.owner),
        };
        self.check_claim(&reg.origin, claim)?;
        self.check_endpoint(&reg.origin, &reg.endpoint, reg.caller.as_ref(), now)?;
        // A caller's ids live in its (tenant, origin) scope; an
        // administrator (the gateway handing back a restarted agentd's
        // routes) keeps the ids it names.
        let id = match (&reg.caller, &reg.route_id) {
            (None, Some(id)) => id.clone(),
            (None, None) => derived_route_id(&reg)?,
            (Some(_), named) => scoped_route_id(
                &reg.tenant,
                &reg.origin,
                named.as_ref(),
                &reg.capability,
                reg.version,
                &reg.endpoint,
            ),
        };
        if id.as_str().starts_with(STATIC_ID_PREFIX) && self.table.get(&id).is_none() {
            return Err(IpcError::invalid(
                "route_id",
                format_args!("prefix {STATIC_ID_PREFIX} is reserved"),
            ));
        }
        if self.held_by_peer(&id) {
            // A route_id names one route: paths learned from peers hold
            // this one (the peer side is refused likewise when ours exists).
            return Err(IpcError::Conflict {
                route_id: id,
                reason: ConflictReason::NotLocal,
            });
        }
        let existing = self.table.get(&id);
        if let Some(existing) = existing {
            if existing.disputed && existing.source == RouteSource::Local {
                return Err(self.owned_elsewhere(&existing.origin));
            }
            let reason = if existing.source != RouteSource::Local {
                Some(ConflictReason::NotLocal)
            } else if existing.tenant != reg.tenant {
                Some(ConflictReason::OtherTenant)
            } else if existing.origin != reg.origin {
                Some(ConflictReason::OtherOrigin)
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(IpcError::Conflict {
                    route_id: id,
                    reason,
                });
            }
        }
        let is_new = existing.is_none();
        // An update keeps the owner its route was created with (the
        // ledger's counts follow it).
        let owner: Option<Owner> = match (existing, &reg.caller) {
            (Some(e), _) => e.owner,
            (None, Some(c)) => Some(c.owner()),
            (None, None) => reg.owner.or(self.claims.owner_of(&reg.origin)),
        };
        // Quotas bound what LAN callers add; an update of a route already
        // held (and an administrator) is never refused by one.
        if is_new && reg.caller.is_some() {
            self.ledger
                .check_new(
                    &self.runtime.quotas,
                    (&reg.origin, self.claims.local_of(&reg.origin).len()),
                    &reg.tenant,
                    owner,
                )
                .map_err(|(quota, holder, limit)| IpcError::QuotaExceeded {
                    quota,
                    holder: holder.into(),
                    limit,
                })?;
        }
        let secs = self.grant(reg.lease_seconds)?;
        let expires_at = now.saturating_add_ms(u64::from(secs) * 1000);
        let allow_loopback = self.loopback_allowed(&reg.origin);
        // The router's trust, not the registrant's: a LAN caller's claim
        // is capped by the tenant's `max_trust` (an administrator's is the
        // operator's; docs/trust-model.md).
        let trust = match reg.caller {
            Some(_) => self.runtime.trust_caps.grant(&reg.tenant, reg.attrs.trust),
            None => reg.attrs.trust,
        };
        let route = Route {
            id: id.clone(),
            capability: reg.capability.into(),
            version: reg.version,
            origin: reg.origin.into(),
            endpoint: reg.endpoint.into(),
            tenant: reg.tenant.into(),
            region: reg.region.into(),
            attrs: Attributes { trust, ..reg.attrs },
            access: reg.access.into(),
            contract: reg.contract.map(Box::new),
            source: RouteSource::Local,
            path: Box::default(),
            next_hop: None,
            lease: Lease::Until(expires_at),
            // An upsert keeps the verdict; the health monitor marks a new
            // route on an endpoint known to be down before it is published.
            healthy: self.table.get(&id).is_none_or(|r| r.healthy),
            allow_loopback,
            owner,
            proof: OriginProof::of_local(RouteSource::Local, owner),
            disputed: false,
        };
        let tenant = route.tenant.clone();
        let outcome = self
            .table
            .upsert(route.clone())
            .map_err(|e| IpcError::from_table(e, &tenant))?;
        if outcome == UpsertOutcome::Created {
            self.ledger.add(&route);
            self.claims.add_local(&route);
        }
        self.table.set_lease_secs(&id, secs);
        if wants_ipv6 {
            self.ipv6_wanted.insert(id.clone());
        } else {
            self.ipv6_wanted.remove(&id);
        }
        let grant = LeaseGrant {
            route_id: id,
            generation: self.table.generation(),
            lease_seconds: secs,
            expires_at,
            public_ipv6: None,
        };
        Ok((
            grant,
            (outcome != UpsertOutcome::Unchanged).then_some(route),
        ))
    }

    pub(super) fn renew(
        &mut self,
        r: Renewal,
        now: Millis,
    ) -> (Result<ResponseBody, IpcError>, Changes) {
        lease_reply(self.try_renew(r, now))
    }

    fn try_renew(
        &mut self,
        r: Renewal,
        now: Millis,
    ) -> Result<(LeaseGrant, Option<Route>), IpcError> {
        let mut route = self.owned(&r.route_id, r.caller.as_ref())?.clone();
        if route.disputed {
            // Another router's claim of the origin won the race: the
            // agent learns it here, and the route ends with its lease.
            return Err(self.owned_elsewhere(&route.origin));
        }
        for (field, v) in [
            ("latency_ms", r.latency_ms),
            ("load_permille", r.load_permille),
        ] {
            if let Some(v) = v {
                crate::route::check_attr(field, v).map_err(|e| IpcError::invalid(field, e))?;
            }
        }
        if let Some(endpoint) = &r.endpoint {
            self.check_endpoint(&route.origin, endpoint, r.caller.as_ref(), now)?;
            route.endpoint = endpoint.into();
            route.allow_loopback = self.loopback_allowed(&route.origin);
        }
        let secs = match r.lease_seconds {
            Some(s) => self.grant(Some(s))?,
            // The length granted last (the granted one is never 0).
            None => match self.table.lease_secs(&r.route_id) {
                Some(s) if s > 0 => s,
                _ => self.grant(None)?,
            },
        };
        let expires_at = now.saturating_add_ms(u64::from(secs) * 1000);
        route.lease = Lease::Until(expires_at);
        if let Some(l) = r.latency_ms {
            route.attrs.latency_ms = l;
        }
        if let Some(l) = r.load_permille {
            route.attrs.load_permille = l;
        }
        if let Some(h) = r.healthy {
            route.healthy = h;
        }
        let tenant = route.tenant.clone();
        let outcome = self
            .table
            .upsert(route.clone())
            .map_err(|e| IpcError::from_table(e, &tenant))?;
        self.table.set_lease_secs(&r.route_id, secs);
        let grant = LeaseGrant {
            route_id: r.route_id,
            generation: self.table.generation(),
            lease_seconds: secs,
            expires_at,
            public_ipv6: None,
        };
        Ok((
            grant,
            (outcome != UpsertOutcome::Unchanged).then_some(route),
        ))
    }

    pub(super) fn unregister(
        &mut self,
        id: &RouteId,
        caller: Option<&Caller>,
    ) -> (Result<ResponseBody, IpcError>, Changes) {
        if let Err(e) = self.owned(id, caller) {
            return (Err(e), Vec::new());
        }
        self.remove_local(id);
        (
            Ok(ResponseBody::Unregistered {
                route_id: id.clone(),
                generation: self.table.generation(),
            }),
            vec![FibChange::Remove(id.clone())],
        )
    }

    /// Removes a local route from the table and every side record.
    pub(super) fn remove_local(&mut self, id: &RouteId) {
        if let Some(route) = self.table.remove(id) {
            self.ledger.remove(&route);
            self.claims.remove_local(&route);
        }
    }

    /// `agentctl flush --origin`: withdraws every local route of `origin`
    /// at once (the FIB sees one removal per route in the same batch).
    pub(super) fn flush(&mut self, origin: &str) -> (Result<ResponseBody, IpcError>, Changes) {
        let ids: Vec<RouteId> = self.claims.local_of(origin).to_vec();
        for id in &ids {
            self.remove_local(id);
        }
        self.count("flushes");
        let reply = ResponseBody::Flushed {
            origin: origin.into(),
            removed: ids.len() as u64,
            route_ids: ids.iter().take(MAX_PAGE as usize).cloned().collect(),
            generation: self.table.generation(),
        };
        (Ok(reply), ids.into_iter().map(FibChange::Remove).collect())
    }
}

/// A stable id for a registration that did not name one: the same agent
/// registering the same capability at the same endpoint gets the same id
/// back (FNV-1a; deterministic across restarts, unlike std's hasher).
pub fn derived_route_id(reg: &Registration) -> Result<RouteId, IpcError> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [
        &*reg.tenant,
        &*reg.origin,
        &*reg.capability,
        &reg.version.to_string(),
        &*reg.endpoint,
    ] {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    // Hex digits are always a valid route id.
    RouteId::new(&format!("r-{h:016x}")).map_err(IpcError::internal)
}

/// Register and renew answer alike: the granted lease, and the route to
/// publish when it changed.
fn lease_reply(
    result: Result<(LeaseGrant, Option<Route>), IpcError>,
) -> (Result<ResponseBody, IpcError>, Changes) {
    match result {
        Ok((grant, route)) => (
            Ok(ResponseBody::Lease(grant)),
            route
                .into_iter()
                .map(|r| FibChange::Upsert(Box::new(r)))
                .collect(),
        ),
        Err(e) => (Err(e), Vec::new()),
    }
}
