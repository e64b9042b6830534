//! Who leads, as each member of a running cluster says it: etcd's Maintenance.Status (our
//! Raft engine answers it too) or ZooKeeper's `srvr` four-letter word (our Zab engine too),
//! and what a set of answers means: a leader a majority follows, a healthy cluster. The
//! failover figures (`fault`) poll it ([`super::views`]) to time detection and the new leader.
//!
//! A term (Raft) or epoch (Zab) has at most one leader, so "a member that a majority
//! follows at a higher term" needs no leader ids: a leader at term t plus enough members
//! at term t. ZooKeeper's `srvr` shows a follower's last zxid, so a follower shows the new
//! epoch once it applied the epoch's first transaction (with writes running, milliseconds).

use std::time::Duration;

use coordbench_drivers::etcd::{connect_client, EtcdSecurity};
use coordbench_drivers::zookeeper::four_letter::four_letter_word;
use coordbench_drivers::zookeeper::ZkTls;
use etcd_client::Client;

use crate::targets::LeaderQuery;
use coordbench_results::kinds::TargetKind;

/// What a member says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    /// No leader known (etcd: leader 0; ZooKeeper: not serving, i.e. LOOKING).
    Electing,
}

/// One member's answer: its role and its term (Raft) or epoch (ZooKeeper, Zab).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberView {
    pub role: Role,
    pub term: u64,
}

/// Asks one member who leads.
pub enum Asker {
    /// etcd's Status through a client of this member alone (connected when first needed,
    /// with the run's TLS; Status needs no user).
    Etcd {
        endpoint: String,
        security: EtcdSecurity,
        client: Option<Box<Client>>,
    },
    /// ZooKeeper's `srvr` at `host:port` (over TLS on a secure client port).
    ZooKeeper { addr: String, tls: Option<ZkTls> },
    /// An independent server (a redis instance, the postgres server) at its endpoint: one
    /// that answers its protocol's ping leads itself, at term 0, so a set of them is
    /// healthy when every one answers, and no fault makes a new leader.
    Standalone(Box<dyn coordbench_drivers::probe::Probe>),
}

impl Asker {
    /// One asker per member; `endpoints` are the members' client endpoints in member order
    /// (etcd URLs or ZooKeeper `host:port`). `None` for targets without members (null).
    pub fn for_members(
        kind: TargetKind,
        endpoints: &[String],
        security: &EtcdSecurity,
        zk_tls: Option<&ZkTls>,
    ) -> Option<Vec<Asker>> {
        match crate::targets::descriptor(kind).leader {
            LeaderQuery::EtcdStatus => Some(
                endpoints
                    .iter()
                    .map(|e| Asker::Etcd {
                        endpoint: e.clone(),
                        security: security.clone(),
                        client: None,
                    })
                    .collect(),
            ),
            LeaderQuery::FourLetterWords => Some(
                endpoints
                    .iter()
                    .map(|e| Asker::ZooKeeper {
                        addr: strip_scheme(e),
                        tls: zk_tls.cloned(),
                    })
                    .collect(),
            ),
            LeaderQuery::Standalone => endpoints
                .iter()
                .map(|e| crate::targets::probe(kind, e).map(Asker::Standalone))
                .collect(),
            LeaderQuery::None => None,
        }
    }

    /// The member's answer within `timeout`; `None`: no answer.
    pub async fn ask(&mut self, timeout: Duration) -> Option<MemberView> {
        match self {
            Asker::Etcd {
                endpoint,
                security,
                client,
            } => {
                if client.is_none() {
                    *client = tokio::time::timeout(timeout, connect(endpoint, security))
                        .await
                        .ok()
                        .flatten()
                        .map(Box::new);
                }
                let c = client.as_mut()?;
                let s = tokio::time::timeout(timeout, c.status()).await.ok()?.ok()?;
                let me = s.header().map(|h| h.member_id())?;
                Some(etcd_view(me, s.leader(), s.raft_term()))
            }
            Asker::ZooKeeper { addr, tls } => {
                let srvr = four_letter_word(addr, "srvr", tls.as_ref());
                let reply = tokio::time::timeout(timeout, srvr).await.ok()?.ok()?;
                srvr_view(&reply)
            }
            Asker::Standalone(probe) => {
                let up = tokio::time::timeout(timeout, probe.ping()).await.ok()?;
                up.then_some(MemberView {
                    role: Role::Leader,
                    term: 0,
                })
            }
        }
    }
}

async fn connect(endpoint: &str, security: &EtcdSecurity) -> Option<Client> {
    // A short timeout: a killed member must cost a poll milliseconds, not seconds. The
    // transport redials by itself once the member is back.
    let endpoints = [endpoint.to_string()];
    // Status needs no token (on etcd and the Raft engine alike): TLS only, so a (re)connect
    // does not wait for an authentication, whose bcrypt check alone can outlast a poll's
    // answer bound on a loaded machine.
    let tls_only = EtcdSecurity {
        tls: security.tls.clone(),
        user: None,
    };
    connect_client(&endpoints, &tls_only, Duration::from_millis(500))
        .await
        .ok()
}

fn strip_scheme(endpoint: &str) -> String {
    endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .to_string()
}

fn etcd_view(member_id: u64, leader: u64, term: u64) -> MemberView {
    let role = match leader {
        0 => Role::Electing,
        l if l == member_id => Role::Leader,
        _ => Role::Follower,
    };
    MemberView { role, term }
}

/// Reads `Mode:` and `Zxid:` of a `srvr` reply; a member that is not serving is electing.
fn srvr_view(reply: &str) -> Option<MemberView> {
    if reply.contains("not currently serving") {
        return Some(MemberView {
            role: Role::Electing,
            term: 0,
        });
    }
    let field = |key: &str| {
        reply
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let role = match field("Mode:")? {
        "leader" | "standalone" => Role::Leader,
        "follower" | "observer" => Role::Follower,
        _ => return None,
    };
    let zxid = field("Zxid:")?;
    let zxid = u64::from_str_radix(zxid.trim_start_matches("0x"), 16).ok()?;
    Some(MemberView {
        role,
        term: zxid >> 32,
    })
}

/// The member a majority of `size` follows, with its term: a leader at term t such that
/// at least a quorum of members (itself included) answered at term t as leader or follower.
pub fn agreed_leader(views: &[Option<MemberView>], size: usize) -> Option<(usize, u64)> {
    let quorum = size / 2 + 1;
    views.iter().enumerate().find_map(|(i, v)| {
        let v = (*v)?;
        if v.role != Role::Leader {
            return None;
        }
        let at_term = views
            .iter()
            .flatten()
            .filter(|w| w.term == v.term && w.role != Role::Electing)
            .count();
        (at_term >= quorum).then_some((i, v.term))
    })
}

/// A healthy cluster: every member answered, none is electing, and a leader has a majority
/// at its term. Returns the leader and its term.
pub fn healthy(views: &[Option<MemberView>]) -> Option<(usize, u64)> {
    let all_serving = views
        .iter()
        .all(|v| v.is_some_and(|v| v.role != Role::Electing));
    all_serving
        .then(|| agreed_leader(views, views.len()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(role: Role, term: u64) -> Option<MemberView> {
        Some(MemberView { role, term })
    }

    #[test]
    fn a_leader_needs_a_quorum_at_its_term() {
        use Role::*;
        // The old leader still thinks it leads at 2; the others moved on to 3.
        let views = [v(Leader, 2), v(Leader, 3), v(Follower, 3)];
        assert_eq!(agreed_leader(&views, 3), Some((1, 3)));
        let views = [None, v(Leader, 3), v(Follower, 2)];
        assert_eq!(
            agreed_leader(&views, 3),
            None,
            "one of three at term 3 is no majority"
        );
        let views = [None, v(Leader, 3), v(Electing, 3), None, v(Follower, 3)];
        assert_eq!(agreed_leader(&views, 5), None);
        assert_eq!(agreed_leader(&[v(Leader, 1)], 1), Some((0, 1)));
    }

    #[test]
    fn a_healthy_cluster_has_every_member_serving_under_one_leader() {
        use Role::*;
        assert_eq!(
            healthy(&[v(Follower, 3), v(Leader, 3), v(Follower, 3)]),
            Some((1, 3))
        );
        // A follower still at the previous epoch (ZooKeeper: no transaction of the new one
        // applied yet) is back all the same.
        assert_eq!(
            healthy(&[v(Follower, 2), v(Leader, 3), v(Follower, 3)]),
            Some((1, 3))
        );
        assert_eq!(healthy(&[None, v(Leader, 3), v(Follower, 3)]), None);
        assert_eq!(
            healthy(&[v(Electing, 4), v(Leader, 3), v(Follower, 3)]),
            None
        );
    }

    #[test]
    fn etcd_status_and_srvr_replies_become_views() {
        assert_eq!(
            etcd_view(7, 7, 4),
            MemberView {
                role: Role::Leader,
                term: 4
            }
        );
        assert_eq!(etcd_view(7, 9, 4).role, Role::Follower);
        assert_eq!(etcd_view(7, 0, 5).role, Role::Electing);
        let reply = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: 0x300000012\nMode: follower\nNode count: 5\n";
        assert_eq!(
            srvr_view(reply),
            Some(MemberView {
                role: Role::Follower,
                term: 3
            })
        );
        let reply = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(srvr_view(reply).map(|v| v.role), Some(Role::Electing));
        assert_eq!(srvr_view("garbage"), None);
        assert_eq!(strip_scheme("http://127.0.0.1:2379"), "127.0.0.1:2379");
    }
}
