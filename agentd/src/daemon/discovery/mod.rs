//! The discovery driver (DESIGN §6): owns the candidate table and the
//! mDNS responder/browser, turns mDNS events into table inputs and tells
//! the event loop which candidates are admitted peers right now.
//!
//! * [`settings`] — what it runs on, from the configuration.
//! * [`mdns`] — announce and browse: our sans-IO mDNS
//!   (`crate::discovery::mdns`) driven by one task and two sockets.
//! * [`unicast`] — unicast DNS-SD lookups in the search domains, and
//!   [`dns`], the exchange each of their questions is.
//!
//! Candidates of both sources share one table and one admission: a
//! router found in a zone is approved, admitted or rejected exactly as
//! one announced on the LAN, and a changed record needs a new approval
//! either way.
//!
//! The event loop calls [`Discovery::configure`] at start and after each
//! reload (settings, our identity), [`Discovery::event`] for each mDNS
//! event, [`Discovery::dns_answered`] for each DNS answer and
//! [`Discovery::expire`] when [`Discovery::next_deadline`] passes; each
//! returns whether the set of automatically admitted peers changed,
//! which the loop then hands to the ARPX driver as extra peers.

pub mod dns;
pub mod mdns;
pub mod settings;
pub mod unicast;

use std::net::IpAddr;

use router_pki::Fingerprint;

use super::peers::settings::{MeshSettings, PeerSettings};
use crate::discovery::record::Record;
use crate::discovery::table::{
    AdmittedPeer, Candidate, Policy, Refusal, Seen, Sighting, Source, Table,
};
use crate::discovery::unicast::answer::{Answer, DnsError};
use crate::discovery::unicast::browse::{Ask, Event, Found};
use crate::ipc::discovery::{AdmissionRefusal, CandidateRow, CandidatesView};
use crate::time::Millis;
use crate::{log_debug, log_info, log_notice, log_warn};
use mdns::{AliasState, Announcement, Mdns, MdnsEvent, MdnsStart};
use settings::DiscoverySettings;
use unicast::{Plan, Unicast};

/// Longest mDNS instance label accepted (a DNS label is at most 63
/// bytes; mDNS conflict renaming adds a few).
const MAX_INSTANCE: usize = 80;

/// Who we are, as far as discovery needs it (from the ARPX driver: the
/// key is only known once the mesh runs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Own {
    pub router_id: Option<String>,
    pub fingerprint: Option<Fingerprint>,
    pub domain: String,
    pub domain_ca: bool,
}

#[derive(Debug)]
pub struct Discovery {
    settings: DiscoverySettings,
    own: Own,
    table: Table,
    mdns: Option<Mdns>,
    /// Why mDNS does not run, or why we do not announce `_arpx._tcp`.
    off_reason: Option<String>,
    /// Our claim on `nexus-router.local` (`None`: not asked for, or
    /// mDNS does not run).
    alias: Option<AliasState>,
    announced: Option<Announcement>,
    /// The mDNS start asked for and not yet taken by the daemon
    /// ([`Discovery::take_start`]).
    start: Option<MdnsStart>,
    /// Numbers the mDNS starts (a late failure report of a replaced one
    /// is ignored).
    starts: u64,
    records_invalid: u64,
    /// Verifications asked for after a lost session.
    verifies: u64,
    /// The admitted set last reported, to tell changes.
    admitted: Vec<AdmittedPeer>,
    /// Unicast DNS-SD, while search domains and a resolver are set.
    unicast: Option<Unicast>,
    /// Why unicast DNS-SD is off although search domains are set.
    unicast_off: Option<String>,
    /// Found instances without a usable address (counted).
    unicast_unusable: u64,
}

fn policy(s: &DiscoverySettings, own: &Own) -> Policy {
    Policy {
        mode: s.mode,
        own_router_id: own.router_id.clone(),
        own_fingerprint: own.fingerprint,
        domain: own.domain.clone(),
        domain_ca: own.domain_ca,
        allow: s.allow.clone(),
        lifetime_ms: s.lifetime_ms,
        approved: s.approved.clone(),
        configured: s.configured.clone(),
    }
}

/// The address to dial: IPv4 first, then a routable IPv6 address
/// (a link-local one would need its interface), lowest first. Loopback
/// only with `loopback` (a lab's zone for routers on one host): a zone
/// must not point our dials at the router's own services.
fn pick_address(addrs: &[IpAddr], loopback: bool) -> Option<IpAddr> {
    let usable = |a: &&IpAddr| match a {
        IpAddr::V4(v) => !v.is_unspecified() && (loopback || !v.is_loopback()) && !v.is_multicast(),
        IpAddr::V6(v) => {
            !v.is_unspecified()
                && (loopback || !v.is_loopback())
                && !v.is_multicast()
                && (v.segments()[0] & 0xffc0) != 0xfe80
        }
    };
    let mut v4: Vec<IpAddr> = addrs
        .iter()
        .filter(usable)
        .filter(|a| a.is_ipv4())
        .copied()
        .collect();
    v4.sort();
    let mut v6: Vec<IpAddr> = addrs
        .iter()
        .filter(usable)
        .filter(|a| a.is_ipv6())
        .copied()
        .collect();
    v6.sort();
    v4.first().or(v6.first()).copied()
}

/// An admitted candidate as a peer section would give it (every other
/// option at its schema default), through the same parser as the file.
pub fn peer_settings(a: &AdmittedPeer) -> Option<PeerSettings> {
    use uci_schema::uci::{Package, Section};
    let mut s = Section::new("peer", None);
    s.set("router_id", a.router_id.as_str());
    s.set("address", a.address.to_string());
    s.set("port", a.port.to_string());
    s.set("data_port", a.data_port.to_string());
    if let Some(pin) = a.pin {
        s.set("key_fingerprint", pin.to_string());
    }
    let pkg = Package {
        name: None,
        sections: vec![s],
    };
    let c = uci_schema::Config::from_package(&pkg, "<discovery>").ok()?;
    MeshSettings::of_config(&c).peers.into_iter().next()
}

impl Discovery {
    pub fn new(settings: DiscoverySettings) -> Discovery {
        let own = Own::default();
        Discovery {
            table: Table::new(policy(&settings, &own)),
            settings,
            own,
            mdns: None,
            off_reason: Some("not started".into()),
            alias: None,
            announced: None,
            start: None,
            starts: 0,
            records_invalid: 0,
            verifies: 0,
            admitted: Vec::new(),
            unicast: None,
            unicast_off: None,
            unicast_unusable: 0,
        }
    }

    /// Applies settings and identity: starts, restarts or stops mDNS,
    /// re-announces when what we announce changed. Returns whether the
    /// admitted set changed.
    pub fn configure(&mut self, settings: DiscoverySettings, own: Own, now: Millis) -> bool {
        for bad in &settings.allow_invalid {
            log_warn!("discovery.allow_fingerprint {bad:?} is not sha256:<64 hex>; ignored");
        }
        let restart = settings.enabled != self.settings.enabled
            || settings.interfaces != self.settings.interfaces
            || (settings.enabled && self.mdns.is_none());
        self.table.set_policy(policy(&settings, &own));
        self.settings = settings;
        self.own = own;
        if restart {
            // A restart does not wait: the old thread finishes on its own.
            let _ = self.stop();
            if self.settings.enabled {
                self.starts += 1;
                let (m, start) = Mdns::new(&self.settings.interfaces, self.starts);
                log_info!(
                    "discovery: mDNS on {}",
                    if self.settings.interfaces.is_empty() {
                        "no interface".to_string()
                    } else {
                        self.settings.interfaces.join(", ")
                    }
                );
                self.mdns = Some(m);
                self.start = Some(start);
                self.off_reason = None;
            } else {
                self.off_reason = Some("discovery.enabled is 0".into());
            }
        }
        self.reannounce();
        self.configure_unicast(now);
        self.admitted_changed()
    }

    /// Starts, restarts or stops unicast DNS-SD. A new plan starts
    /// afresh: what the old one found is withdrawn (its candidates live
    /// their lifetime), and the first lookups go out now.
    fn configure_unicast(&mut self, now: Millis) {
        let plan = Plan::of(&self.settings);
        let wanted = plan.as_ref().ok().cloned().flatten();
        self.unicast_off = plan.err();
        if let Some(why) = &self.unicast_off {
            log_warn!("discovery: {why}");
        }
        if self.unicast.as_ref().map(Unicast::plan) == wanted.as_ref() {
            return;
        }
        if let Some(old) = self.unicast.take() {
            for instance in old.known() {
                self.table.withdrawn(Source::Unicast, &instance, now);
            }
        }
        if let Some(plan) = wanted {
            log_info!(
                "discovery: unicast DNS-SD in {} through {}{}",
                plan.browse.domains.join(", "),
                plan.resolver,
                if plan.browse.require_dnssec {
                    " (answers must be DNSSEC-validated: AD bit)"
                } else {
                    ""
                }
            );
            self.unicast = Some(Unicast::new(plan, now));
            self.tick_unicast(now);
        }
    }

    /// Due lookups start, overdue ones end, lapsed instances are lost.
    fn tick_unicast(&mut self, now: Millis) {
        let Some(u) = &mut self.unicast else { return };
        let events = u.tick(now);
        self.unicast_events(events, now);
    }

    /// The answer (or failure) of one unicast question. Returns whether
    /// the admitted set changed.
    pub fn dns_answered(
        &mut self,
        ask: &Ask,
        result: Result<Answer, DnsError>,
        now: Millis,
    ) -> bool {
        let Some(u) = &mut self.unicast else {
            return false;
        };
        let before = u.errors();
        let events = u.answered(ask, result, now);
        for (domain, error) in u.errors() {
            let was = before
                .iter()
                .find(|(d, _)| *d == domain)
                .and_then(|(_, e)| e.as_ref());
            if let Some(e) = error.as_ref().filter(|e| Some(*e) != was) {
                log_warn!("discovery: unicast DNS-SD in {domain}: {e}");
            }
        }
        self.unicast_events(events, now);
        self.admitted_changed()
    }

    /// The questions to send (effects).
    pub fn take_dns(&mut self) -> Vec<dns::DnsQuery> {
        self.unicast
            .as_mut()
            .map(Unicast::take_queries)
            .unwrap_or_default()
    }

    fn unicast_events(&mut self, events: Vec<Event>, now: Millis) {
        for e in events {
            match e {
                Event::Found(f) => self.unicast_found(f, now),
                Event::Lost { instance } => {
                    if self.table.withdrawn(Source::Unicast, &instance, now) {
                        log_info!("discovery: candidate {instance} is no longer published");
                    }
                }
                Event::Ask(_) => {}
            }
        }
    }

    fn unicast_found(&mut self, f: Found, now: Millis) {
        let Some(address) = pick_address(&f.addresses, self.settings.allow_loopback) else {
            self.unicast_unusable += 1;
            log_debug!("discovery: {} ignored: no usable address", f.instance);
            return;
        };
        let id = f.record.router_id.clone();
        let version = f.record.version;
        let seen = Sighting {
            source: Source::Unicast,
            instance: f.instance.clone(),
            record: f.record,
            address,
            port: f.port,
        };
        let outcome = self.table.announced(seen, now);
        self.log_seen(
            outcome,
            &format!("{id} ({})", f.instance),
            address,
            f.port,
            version,
        );
        if matches!(outcome, Seen::New | Seen::NewVersion { .. }) {
            if let Some(conflict) = self
                .table
                .get(Source::Unicast, &f.instance)
                .and_then(|c| self.table.conflict(c))
            {
                log_warn!("discovery: conflict: {conflict}");
            }
        }
    }

    fn log_seen(&self, outcome: Seen, shown: &str, address: IpAddr, port: u16, version: u32) {
        match outcome {
            Seen::New => log_notice!(
                "discovery: candidate {shown} at {address}:{port} record version {version}"
            ),
            Seen::NewVersion { old } => log_notice!(
                "discovery: candidate {shown} now announces record version {version} (was {old}; an approval of {old} no longer applies)"
            ),
            Seen::Refused => log_debug!("discovery: candidate {shown} refused: table full"),
            Seen::Refreshed | Seen::Own => {}
        }
    }

    /// What to announce, and why `_arpx._tcp` is not announced. The
    /// SDK API and the alias need only a router_id: an agent finds a
    /// router that runs no mesh.
    fn wanted(&self) -> (Option<Announcement>, Option<String>) {
        let s = &self.settings;
        let Some(rid) = self.own.router_id.clone() else {
            return (
                None,
                Some("not announcing: agentd.router_id is not set".into()),
            );
        };
        let arpx = (|| {
            let fp = self
                .own
                .fingerprint
                .ok_or("not announcing: ARPX sessions are off (no identity key)")?;
            let arpx_port = s.arpx_port.ok_or("not announcing: arpx.listen is off")?;
            let data_port = s
                .data_port
                .ok_or("not announcing: gateway.peer_listen is off")?;
            let record = Record::ours(&rid, &self.own.domain, fp, arpx_port, data_port);
            Ok::<_, &str>((record, arpx_port))
        })();
        let why = arpx.as_ref().err().map(|e| e.to_string());
        let a = Announcement {
            router_id: rid,
            arpx: arpx.ok(),
            sdk_port: s.sdk_port,
            alias: s.nexus_alias,
        };
        (Some(a), why)
    }

    fn reannounce(&mut self) {
        let (wanted, why) = self.wanted();
        let Some(m) = &mut self.mdns else {
            self.announced = None;
            self.alias = None;
            return;
        };
        let alias_wanted = wanted
            .as_ref()
            .is_some_and(|a| a.alias && a.sdk_port.is_some());
        if !alias_wanted {
            self.alias = None;
        }
        if wanted == self.announced {
            self.off_reason = why;
            return;
        }
        let result = m.announce(wanted.as_ref());
        self.announced = wanted.clone();
        if alias_wanted && self.alias.is_none() && result.is_ok() {
            self.alias = Some(AliasState::Claiming);
        }
        self.off_reason = match result {
            Ok(()) => {
                if let Some(a) = wanted.as_ref().filter(|a| a.arpx.is_some()) {
                    let version = a.arpx.as_ref().map_or(0, |(r, _)| r.version);
                    log_notice!(
                        "discovery: announcing {} record version {version} on {}",
                        a.router_id,
                        m.interfaces().join(", ")
                    );
                }
                why
            }
            Err(e) => {
                log_warn!("discovery: cannot announce: {e}");
                self.announced = None;
                Some(format!("mDNS: {e}"))
            }
        };
    }

    /// Our claim on `nexus-router.local` moved on.
    fn alias_event(&mut self, state: AliasState) {
        let Some(m) = &mut self.mdns else { return };
        if self.alias == Some(state.clone()) {
            return;
        }
        match &state {
            AliasState::Claiming => {
                log_info!("discovery: claiming {}", mdns::alias_name())
            }
            AliasState::Answering => {
                log_notice!("discovery: answering {}", mdns::alias_name())
            }
            AliasState::Deferred(why) => {
                log_notice!(
                    "discovery: leaving {} to another device: {why}",
                    mdns::alias_name()
                );
                m.defer_alias();
            }
        }
        // A late report of a claim given up does not revive it.
        if !matches!(self.alias, Some(AliasState::Deferred(_))) {
            self.alias = Some(state);
        }
    }

    /// Our claim on `nexus-router.local`, for `agentctl status`.
    pub fn alias_view(&self) -> crate::ipc::message::AliasView {
        let (state, detail) = match (&self.alias, self.settings.nexus_alias) {
            (_, false) => ("off", Some("discovery.nexus_alias is 0".to_string())),
            (None, true) if !self.settings.enabled => {
                ("off", Some("discovery.enabled is 0".to_string()))
            }
            (None, true) if self.mdns.is_none() => ("off", self.off_reason.clone()),
            (None, true) => ("off", Some("not announcing the SDK API".to_string())),
            (Some(AliasState::Claiming), _) => ("claiming", None),
            (Some(AliasState::Answering), _) => ("answering", None),
            (Some(AliasState::Deferred(why)), _) => ("deferred", Some(why.clone())),
        };
        crate::ipc::message::AliasView {
            name: mdns::alias_name().into(),
            state: state.into(),
            detail: detail.map(Into::into),
        }
    }

    /// One mDNS event. Returns whether the admitted set changed.
    pub fn event(&mut self, ev: MdnsEvent, now: Millis) -> bool {
        match ev {
            MdnsEvent::Resolved(r) => {
                let record = match Record::from_rdata(&r.txt) {
                    Ok(rec) => rec,
                    Err(e) => {
                        self.records_invalid += 1;
                        log_debug!("discovery: {} ignored: {e}", r.fullname);
                        return false;
                    }
                };
                // The instance is the router_id unless mDNS conflict
                // resolution renamed it (another host announces that
                // name): keep it apart, the conflict must be seen.
                let instance = mdns::instance_of(&r.fullname);
                if instance.is_empty() || instance.len() > MAX_INSTANCE {
                    self.records_invalid += 1;
                    log_debug!("discovery: {} ignored: no usable instance name", r.fullname);
                    return false;
                }
                let Some(address) = pick_address(&r.addresses, false) else {
                    self.records_invalid += 1;
                    log_debug!("discovery: {} ignored: no usable address", r.fullname);
                    return false;
                };
                let id = record.router_id.clone();
                let version = record.version;
                let seen = Sighting {
                    source: Source::Mdns,
                    instance: instance.to_string(),
                    record,
                    address,
                    port: r.port,
                };
                let shown = if instance == id {
                    id.clone()
                } else {
                    format!("{id} (mDNS instance '{instance}')")
                };
                let outcome = self.table.announced(seen, now);
                self.log_seen(outcome, &shown, address, r.port, version);
                let changed = matches!(outcome, Seen::New | Seen::NewVersion { .. });
                if let Some(conflict) = self
                    .table
                    .get(Source::Mdns, instance)
                    .filter(|_| changed)
                    .and_then(|c| self.table.conflict(c))
                {
                    log_warn!("discovery: conflict: {conflict}");
                }
            }
            MdnsEvent::Alias(state) => {
                self.alias_event(state);
                return false;
            }
            MdnsEvent::Removed { fullname } => {
                let id = mdns::instance_of(&fullname).to_string();
                if self.table.withdrawn(Source::Mdns, &id, now) {
                    log_info!("discovery: candidate {id} withdrew its announcement");
                }
            }
        }
        self.admitted_changed()
    }

    /// The ARPX session with `router_id` ended. If it is an announced
    /// candidate, its mDNS records are verified: a router that vanished
    /// without a goodbye (crash, power loss, cable) then stops being
    /// announced within ~10 s instead of when its records' TTL (120 s)
    /// runs out, and its lifetime starts. A live router answers and
    /// nothing changes. (Every announced instance of the router_id: the
    /// session does not say which one it was.)
    pub fn session_lost(&mut self, router_id: &str) {
        let Some(m) = &self.mdns else { return };
        let instances: Vec<String> = self
            .table
            .of_router(router_id)
            // Only mDNS records can be verified over mDNS; a unicast
            // one is confirmed by its next lookup.
            .filter(|c| c.announced && c.seen.source == Source::Mdns)
            .map(|c| c.seen.instance.clone())
            .collect();
        for instance in instances {
            self.verifies += 1;
            // `verify` names the instance of `_arpx._tcp`.
            match m.verify(&instance) {
                Ok(()) => {
                    log_debug!("discovery: verifying {instance}'s announcement (session lost)")
                }
                Err(e) => log_warn!("discovery: cannot verify {instance}'s announcement: {e}"),
            }
        }
    }

    /// Drops the candidates whose lifetime ended. Returns whether the
    /// admitted set changed.
    pub fn expire(&mut self, now: Millis) -> bool {
        self.tick_unicast(now);
        for (_, id) in self.table.expire(now) {
            log_info!("discovery: candidate {id} expired");
        }
        self.admitted_changed()
    }

    /// The earliest of: a candidate's lifetime end, a unicast lookup due.
    pub fn next_deadline(&self) -> Option<Millis> {
        let unicast = self.unicast.as_ref().and_then(Unicast::next_deadline);
        [self.table.next_deadline(), unicast]
            .into_iter()
            .flatten()
            .min()
    }

    fn admitted_changed(&mut self) -> bool {
        let now = self.table.admitted();
        if now == self.admitted {
            return false;
        }
        self.admitted = now;
        true
    }

    /// The router_ids admitted right now.
    pub fn admitted_ids(&self) -> Vec<Box<str>> {
        self.admitted
            .iter()
            .map(|a| a.router_id.as_str().into())
            .collect()
    }

    /// The configured peers plus the admitted candidates not already
    /// configured.
    pub fn mesh(&self, configured: &MeshSettings) -> MeshSettings {
        let mut m = configured.clone();
        for a in &self.admitted {
            if m.peer(&a.router_id).is_some() {
                continue;
            }
            match peer_settings(a) {
                Some(p) => m.peers.push(p),
                None => log_warn!(
                    "discovery: admitted {} has no usable peer form",
                    a.router_id
                ),
            }
        }
        m
    }

    /// The candidate `router_id` if it may be approved at `version`.
    pub fn check_approve(
        &self,
        router_id: &str,
        version: u32,
    ) -> Result<Candidate, AdmissionRefusal> {
        self.table
            .check_approve(router_id, version)
            .cloned()
            .map_err(|r| match r {
                Refusal::AdmissionOff => AdmissionRefusal::AdmissionOff,
                Refusal::NotFound { router_id } => AdmissionRefusal::NotFound {
                    router_id: router_id.into(),
                },
                Refusal::VersionMismatch {
                    router_id,
                    asked,
                    current,
                } => AdmissionRefusal::VersionMismatch {
                    router_id: router_id.into(),
                    asked,
                    current,
                },
                Refusal::StaticPeer { router_id } => AdmissionRefusal::StaticPeer {
                    router_id: router_id.into(),
                    section: "a peer section".into(),
                },
            })
    }

    pub fn view(&self, now: Millis) -> CandidatesView {
        CandidatesView {
            admission: self.settings.mode.as_str().into(),
            off_reason: self.off_reason.as_deref().map(Into::into),
            candidates: self
                .table
                .iter()
                .take(crate::ipc::discovery::MAX_CANDIDATE_ROWS)
                .map(|(c, state)| {
                    let r = &c.seen.record;
                    CandidateRow {
                        router_id: r.router_id.as_str().into(),
                        source: c.seen.source.as_str().into(),
                        instance: c.seen.instance.as_str().into(),
                        reason: self.table.conflict(c).map(|x| x.to_string().into()),
                        version: r.version,
                        domain: r.domain.as_str().into(),
                        fingerprint: r.fingerprint.to_string().into(),
                        address: c.seen.address.to_string().into(),
                        port: c.seen.port,
                        data_port: r.data_port,
                        state: state.as_str().into(),
                        announced: c.announced,
                        expires_in_ms: self.table.expires_in_ms(c, now),
                    }
                })
                .collect(),
            unicast_off_reason: self.unicast_off.as_deref().map(Into::into),
            unicast: self
                .unicast
                .as_ref()
                .map(|u| u.rows(now))
                .unwrap_or_default(),
        }
    }

    /// `discovery.*` counters for `agentctl stats`.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.table.counters();
        vec![
            ("discovery.candidates", self.table.len() as u64),
            ("discovery.admitted", self.admitted.len() as u64),
            ("discovery.announcements", c.announcements),
            ("discovery.own_ignored", c.own_ignored),
            ("discovery.refused_full", c.refused_full),
            ("discovery.expired", c.expired),
            ("discovery.version_changes", c.version_changes),
            ("discovery.records_invalid", self.records_invalid),
            ("discovery.verifies", self.verifies),
            ("discovery.unicast_unusable", self.unicast_unusable),
        ]
    }

    /// Withdraws our announcements (goodbyes) and stops mDNS. Returns
    /// what to wait on for the goodbyes to be out (the daemon's exit).
    pub fn stop(&mut self) -> Option<mdns::MdnsStopped> {
        let stopped = self.mdns.take().map(Mdns::stop);
        // Never started: nothing to stop (its handle's commands go
        // nowhere).
        self.start = None;
        self.announced = None;
        self.alias = None;
        stopped
    }

    /// The mDNS start to carry out, if [`Discovery::configure`] asked
    /// for one (the daemon runs it off the loop; a failure comes back
    /// through [`Discovery::start_failed`]).
    pub fn take_start(&mut self) -> Option<MdnsStart> {
        self.start.take()
    }

    /// mDNS start number `serial` failed: discovery is off, and
    /// `agentctl candidates` says why. A reload tries again.
    pub fn start_failed(&mut self, serial: u64, error: &str) {
        if serial != self.starts || self.mdns.is_none() {
            return;
        }
        log_warn!("discovery: cannot start mDNS: {error}");
        self.mdns = None;
        self.announced = None;
        self.alias = None;
        self.off_reason = Some(format!("mDNS: {error}"));
    }
}

#[cfg(test)]
mod tests;
