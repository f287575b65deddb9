//! Checks of a router's whole configuration file, beyond its sections:
//! every section can be valid on its own while the file as a whole still
//! cannot run a router's mesh.
//!
//! - An empty file, or one without `config agentd 'main'`: the router
//!   has no identity of its own, its peer sessions cannot start, and its
//!   `default_action` is unknown (an operator's `deny` may be what was
//!   lost), so the policy is unknown too.
//! - `peer` sections while `agentd.router_id` is empty: a mesh identity
//!   must be stable, so agentd starts no peer session on the host name.
//!
//! These checks belong to the file agentd runs on (`agentd
//! --check-config`, reload, startup, the file `agentctl approve` edits),
//! not to a fragment of one: tests and tools build configurations from
//! a few sections, and agent-gw reads only its own sections. They are
//! applied with [`Partial::whole_file`].

use super::error::{ConfigError, ConfigErrorKind, Problem, Recovery, SectionRef};
use super::Partial;

/// What the whole-file checks need to know about the parsed package
/// beyond the typed config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Sections in the file, of any type.
    pub sections: usize,
    /// The (first) `agentd` section.
    pub main: Option<SectionRef>,
}

impl Partial {
    /// Adds the problems of the file as a router's whole configuration
    /// (see the [module](self) above): a file without
    /// `config agentd 'main'` (the policy is then unknown, see
    /// [`policy_problems`](Partial::policy_problems)), and an empty
    /// `agentd.router_id` while enabled `peer` sections exist (they are
    /// kept, but no session starts). Nothing is added when the file was
    /// not read to its end: the problem that stopped the reading says
    /// more than what seems to be missing after it.
    pub fn whole_file(mut self, file: &str) -> Partial {
        let unread = self
            .problems
            .iter()
            .any(|p| matches!(p.recovery, Recovery::FileIgnored | Recovery::RestIgnored));
        if unread {
            return self;
        }
        let peers = self.config.peers.iter().filter(|p| p.enabled).count();
        match &self.shape.main {
            None => {
                let error = ConfigError {
                    file: file.to_string(),
                    section: None,
                    option: None,
                    kind: ConfigErrorKind::NoMainSection {
                        sections: self.shape.sections,
                        peers,
                    },
                };
                self.add(error, Recovery::SectionDefaults);
            }
            Some(main) if peers > 0 && self.config.agentd.router_id.is_empty() => {
                let first = self
                    .config
                    .peers
                    .iter()
                    .find(|p| p.enabled)
                    .map(|p| p.at.to_string())
                    .unwrap_or_default();
                let error = ConfigError {
                    file: file.to_string(),
                    section: Some(main.clone()),
                    option: Some("router_id".into()),
                    kind: ConfigErrorKind::RouterIdNeeded { peers, first },
                };
                self.add(error, Recovery::PeersIdle);
            }
            Some(_) => {}
        }
        self
    }

    fn add(&mut self, error: ConfigError, recovery: Recovery) {
        self.errors.push(error.clone());
        self.problems.push(Problem { error, recovery });
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigErrorKind, Recovery};

    const FILE: &str = "/etc/config/agentd";
    const PEER: &str =
        "config peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n";

    fn whole(text: &str) -> crate::Partial {
        Config::from_str_partial(text, FILE).whole_file(FILE)
    }

    #[test]
    fn an_empty_file_is_refused_and_says_it_is_empty() {
        for text in ["", "\n\n# only a comment\n"] {
            let p = whole(text);
            let e = p.errors();
            assert_eq!(e.0.len(), 1, "{e}");
            assert_eq!(
                e.0[0].kind,
                ConfigErrorKind::NoMainSection {
                    sections: 0,
                    peers: 0
                }
            );
            assert_eq!(
                e.to_string(),
                "/etc/config/agentd: the file is empty: a router's configuration needs at least `config agentd 'main'` with its router_id"
            );
            assert_eq!(p.problems[0].recovery, Recovery::SectionDefaults);
            assert_eq!(p.policy_problems().count(), 1, "default_action is unknown");
            assert!(p.into_result().is_err());
        }
        assert!(
            Config::from_str("", FILE).is_ok(),
            "an empty fragment stays valid"
        );
    }

    #[test]
    fn a_file_without_main_is_refused_naming_what_is_missing() {
        let text = format!("config arpx 'arpx'\n\toption reflector '1'\n{PEER}");
        let p = whole(&text);
        let e = p.errors();
        assert_eq!(
            e.0.len(),
            1,
            "one error, not a second one for router_id: {e}"
        );
        assert_eq!(
            e.to_string(),
            "/etc/config/agentd: no `config agentd 'main'` section: router_id, identity, leases and default_action are at their defaults, and the 1 enabled peer section(s) need a router_id"
        );
        assert_eq!(p.policy_problems().count(), 1);
        assert_eq!(p.config.peers.len(), 1, "the rest of the file is read");
    }

    #[test]
    fn main_under_another_name_counts() {
        let p = whole("config agentd 'router'\n\toption router_id 'router-a'\n");
        assert!(p.is_valid(), "{}", p.errors());
    }

    #[test]
    fn peers_without_router_id_are_refused_naming_the_first_peer() {
        for main in [
            "config agentd 'main'\n",
            "config agentd 'main'\n\toption router_id ''\n",
        ] {
            let p = whole(&format!("{main}{PEER}"));
            let e = p.errors();
            assert_eq!(e.0.len(), 1, "{e}");
            assert_eq!(
                e.to_string(),
                "/etc/config/agentd: agentd 'main': option 'router_id': required when peer sections are configured (1 enabled, the first peer 'b'): without it no peer session starts"
            );
            assert_eq!(p.problems[0].recovery, Recovery::PeersIdle);
            assert_eq!(p.policy_problems().count(), 0, "the policy is known");
            assert_eq!(p.config.peers.len(), 1, "the peers stay listed");
        }
    }

    #[test]
    fn disabled_peers_need_no_router_id() {
        let text = format!("config agentd 'main'\n{PEER}\toption enabled '0'\n");
        assert!(whole(&text).is_valid());
        let text = format!("config agentd 'main'\n\toption router_id 'router-a'\n{PEER}");
        assert!(whole(&text).is_valid());
    }

    #[test]
    fn a_file_not_read_to_its_end_gets_no_guesses_about_what_is_missing() {
        let p = whole("config arpx 'arpx'\n\toption listen '\n");
        assert_eq!(p.problems[0].recovery, Recovery::RestIgnored);
        assert!(
            !p.problems
                .iter()
                .any(|x| matches!(x.error.kind, ConfigErrorKind::NoMainSection { .. })),
            "{:?}",
            p.problems
        );
    }
}
