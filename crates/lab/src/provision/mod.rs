//! Provisioning: starting, inspecting and tearing down the clusters a run measures.
//!
//! A [`Cluster`] is a set of member processes that this process started (or none, for a
//! cluster the user attached with `--endpoints`). Every member is killed when the cluster is
//! stopped or dropped, so an error or Ctrl-C never leaves a server behind.

pub mod disk;
mod error;
pub mod etcd;
mod etcd_auth;
pub mod executable;
pub mod ports;
pub mod postgres;
pub mod process;
pub mod raft;
pub mod redis;
mod standalone;
pub mod zab;
pub mod zookeeper;
pub mod zookeeper_tls;

pub use coordbench_kv::AutoCompaction;
pub use disk::DiskKind;
pub use error::ProvisionError;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::netdelay::{Ends, Handshake, NetDelay, Proxy};
use crate::syncfs::SyncFsMount;
use disk::DataRoot;
use process::{Launch, ManagedProcess};

/// How long members get to exit after SIGTERM when a cluster stops, before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Log lines kept in a [`ProvisionError::MemberExited`].
const LOG_TAIL_LINES: usize = 30;

/// What to start: the options shared by every target's launcher.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Number of voting members (1, 3 or 5 for etcd).
    pub size: usize,
    /// Where the members keep their data, and whether they sync it.
    pub disk: DiskKind,
    /// Session/lease TTL the run uses; launchers whose timing depends on it (ZooKeeper's
    /// tickTime) derive their settings from it.
    pub ttl: Duration,
    /// First port to use (client and peer ports are allocated upwards from it); `None`
    /// picks free ports.
    pub base_port: Option<u16>,
    /// Directory for member logs and, for `DiskKind::Disk`, data directories.
    pub work_dir: PathBuf,
    /// Emulated kinds: the delay per sync instead of the profile's (`--sync-delay`).
    pub sync_delay: Option<Duration>,
    /// Delay between members through the proxy (`--net-delay`); `None`: direct. A zero
    /// delay puts the proxy in the path only so that links can be cut ([`Cluster::partition`]).
    pub net_delay: Option<NetDelay>,
    /// Also delay clients' traffic to members (`--net-delay-clients`).
    pub net_delay_clients: bool,
    /// Entries (transactions) between a member's snapshots (`--snapshot-every`): raft and
    /// zab `--snapshot-every`, etcd `--snapshot-count`, ZooKeeper `snapCount`; `None`: each
    /// one's own default.
    pub snapshot_every: Option<u64>,
    /// etcd and raft: the leader compacts the history on this setting, given to both as
    /// etcd's `--auto-compaction-mode`/`--auto-compaction-retention`
    /// (`--auto-compaction-*`); `None`: never, the default of both.
    pub auto_compaction: Option<AutoCompaction>,
}

impl ClusterSpec {
    /// A spec with no sync-delay override, no network delay, each server's own snapshot
    /// cadence and no automatic compaction.
    pub fn new(size: usize, disk: DiskKind, ttl: Duration, work_dir: PathBuf) -> ClusterSpec {
        ClusterSpec {
            size,
            disk,
            ttl,
            base_port: None,
            work_dir,
            sync_delay: None,
            net_delay: None,
            net_delay_clients: false,
            snapshot_every: None,
            auto_compaction: None,
        }
    }

    /// `--auto-compaction-*` as etcd and `serve raft` both take it: their flags, and
    /// run.json's settings of it (neither when off).
    pub(crate) fn auto_compaction_args(&self) -> (Vec<String>, Vec<(String, String)>) {
        self.auto_compaction
            .as_ref()
            .map_or_else(Default::default, |a| {
                let settings = vec![
                    ("auto-compaction-mode".into(), a.mode.to_string()),
                    ("auto-compaction-retention".into(), a.text.clone()),
                ];
                (a.flags().to_vec(), settings)
            })
    }

    /// Targets other than etcd and raft keep no history to compact: a spec asking for it
    /// is refused rather than run without it.
    pub(crate) fn refuse_auto_compaction(&self, target: &str) -> Result<(), ProvisionError> {
        match self.auto_compaction {
            Some(_) => Err(ProvisionError::Unsupported(auto_compaction_refused(target))),
            None => Ok(()),
        }
    }
}

/// The one line that refuses `--auto-compaction-*` on `target`.
pub fn auto_compaction_refused(target: &str) -> String {
    format!("--auto-compaction-mode and --auto-compaction-retention apply to etcd and raft (etcd's history compaction), not --target {target}")
}

/// A description of a started cluster, stored in run.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    pub target: String,
    pub size: usize,
    /// `None` for an attached cluster, whose storage coordbench does not know.
    pub disk: Option<DiskKind>,
    /// False when the user started the cluster and attached it with `--endpoints`.
    pub provisioned: bool,
    pub binary: Option<String>,
    /// Server version as the cluster reports it (e.g. etcd's Status), once known.
    pub version: Option<String>,
    /// Where the server came from, in one line: `coordbench install`'s provenance (module
    /// or artifact, toolchain, digest) or the Debian package (started real servers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub members: Vec<MemberInfo>,
    /// Server flags that shape performance (heartbeat, election timeout, ...).
    pub settings: Vec<(String, String)>,
    /// The election timing the members run with (started clusters only), whether or not
    /// the run asked for one (`--election-timeout`, `--heartbeat`).
    pub election_timing: Option<crate::election_timing::EffectiveTiming>,
}

impl ClusterInfo {
    /// A cluster coordbench starts, before its members run: `binary` runs each member
    /// with `settings`; `source` and `version` are filled in once known.
    pub(crate) fn started(
        target: &str,
        spec: &ClusterSpec,
        binary: String,
        settings: Vec<(String, String)>,
        election_timing: crate::election_timing::EffectiveTiming,
    ) -> ClusterInfo {
        ClusterInfo {
            target: target.to_string(),
            size: spec.size,
            disk: Some(spec.disk),
            provisioned: true,
            binary: Some(binary),
            version: None,
            source: None,
            members: Vec::new(),
            settings,
            election_timing: Some(election_timing),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberInfo {
    pub name: String,
    pub client_url: String,
    pub peer_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub log_file: Option<PathBuf>,
    pub pid: Option<u32>,
}

/// One member process, how it was started, and whether it was brought down on purpose
/// (fault injection).
#[derive(Debug)]
struct Member {
    name: String,
    launch: Launch,
    process: ManagedProcess,
    killed: bool,
}

/// A running cluster: the member processes coordbench started (none when attached) and
/// their description. Dropping it stops it.
#[derive(Debug)]
pub struct Cluster {
    info: ClusterInfo,
    members: Vec<Member>,
    /// The delay proxy members (and maybe clients) talk through, if any.
    proxy: Option<Proxy>,
    proxy_clients: bool,
    /// Sync-delay filesystems under members' directories; unmounted after members stop.
    mounts: Vec<SyncFsMount>,
    data_root: Option<DataRoot>,
    stopped: bool,
}

impl Cluster {
    /// A cluster the user runs, reached at `endpoints`; coordbench starts and stops nothing.
    pub fn attached(target: &str, endpoints: Vec<String>) -> Cluster {
        let members = endpoints
            .into_iter()
            .enumerate()
            .map(|(i, url)| MemberInfo {
                name: format!("endpoint{}", i + 1),
                client_url: url,
                peer_url: None,
                data_dir: None,
                log_file: None,
                pid: None,
            })
            .collect::<Vec<_>>();
        Cluster {
            info: ClusterInfo {
                target: target.to_string(),
                size: members.len(),
                disk: None,
                provisioned: false,
                binary: None,
                version: None,
                source: None,
                members,
                settings: Vec::new(),
                election_timing: None,
            },
            members: Vec::new(),
            proxy: None,
            proxy_clients: false,
            mounts: Vec::new(),
            data_root: None,
            stopped: false,
        }
    }

    /// An empty provisioned cluster that launchers fill with [`add_member`](Self::add_member).
    /// Built before the first member starts so that an early return drops it and thereby
    /// stops whatever was started. Sets up the delay proxy `spec` asks for.
    pub(crate) fn provisioned(
        mut info: ClusterInfo,
        data_root: Option<DataRoot>,
        spec: &ClusterSpec,
    ) -> Cluster {
        if spec.net_delay == Some(NetDelay::default()) && !spec.net_delay_clients {
            info.settings.push((
                "peer-proxy".into(),
                "members talk through coordbench's proxy at zero delay, so links can be cut (partitions)".into(),
            ));
        } else if let Some(d) = spec.net_delay {
            let between = if spec.net_delay_clients {
                "members, clients-members"
            } else {
                "members"
            };
            info.settings
                .push(("net-delay".into(), format!("{d} one-way between {between}")));
        }
        if let Some(d) = spec.sync_delay.filter(|_| spec.disk.is_emulated()) {
            info.settings
                .push(("sync-delay-us".into(), d.as_micros().to_string()));
        }
        Cluster {
            info,
            members: Vec::new(),
            proxy: spec.net_delay.map(Proxy::new),
            proxy_clients: spec.net_delay_clients,
            mounts: Vec::new(),
            data_root,
            stopped: false,
        }
    }

    /// The address through which traffic to a member's peer port `upstream` goes: a new
    /// proxy route named `name` (e.g. `m1->m2`) between the members `ends` names, or
    /// `upstream` itself without a proxy.
    pub(crate) async fn peer_route(
        &mut self,
        name: String,
        upstream: SocketAddr,
        ends: Ends,
    ) -> Result<SocketAddr, ProvisionError> {
        self.peer_route_with(name, upstream, ends, Handshake::Plain)
            .await
    }

    /// [`peer_route`](Self::peer_route) for a protocol whose handshake the proxy adapts.
    pub(crate) async fn peer_route_with(
        &mut self,
        name: String,
        upstream: SocketAddr,
        ends: Ends,
        handshake: Handshake,
    ) -> Result<SocketAddr, ProvisionError> {
        match self.proxy.as_mut() {
            Some(proxy) => proxy
                .add_route_with(name.clone(), upstream, ends, handshake)
                .await
                .map_err(|e| ProvisionError::io(format!("opening proxy route {name}"), e)),
            None => Ok(upstream),
        }
    }

    /// Like [`peer_route`](Self::peer_route) for a member's client port, routed only with
    /// `--net-delay-clients`.
    pub(crate) async fn client_route(
        &mut self,
        name: String,
        upstream: SocketAddr,
    ) -> Result<SocketAddr, ProvisionError> {
        if !self.proxy_clients {
            return Ok(upstream);
        }
        self.peer_route(name, upstream, Ends::Client).await
    }

    /// The proxy between members, if the cluster has one.
    pub fn proxy(&self) -> Option<&Proxy> {
        self.proxy.as_ref()
    }

    /// Cuts every link between members of different `groups` (0-based member indices;
    /// every member in exactly one group, at least two groups): their connections stall
    /// and new ones hang until [`heal`](Self::heal), while every member keeps its client
    /// connections. Needs the members to talk through the proxy (a cluster started with a
    /// network delay, zero included).
    pub fn partition(&mut self, groups: &[Vec<usize>]) -> Result<(), ProvisionError> {
        let count = self.members.len();
        let Some(proxy) = self.proxy.as_ref() else {
            return Err(ProvisionError::Unsupported(
                "a partition needs the members to talk through coordbench's proxy; start the cluster with a network delay (zero is enough)".into(),
            ));
        };
        let group_of = groups_of(groups, count).map_err(ProvisionError::Unsupported)?;
        for from in 0..count {
            for to in 0..count {
                if group_of[from] != group_of[to] {
                    proxy.set_link_up(from, to, false);
                }
            }
        }
        Ok(())
    }

    /// Restores every link [`partition`](Self::partition) cut. Idempotent.
    pub fn heal(&mut self) {
        if let Some(proxy) = self.proxy.as_ref() {
            proxy.heal();
        }
    }

    pub(crate) fn add_mount(&mut self, mount: SyncFsMount) {
        self.mounts.push(mount);
    }

    /// Records a member started with `launch`; `info.members[i]` must describe `members[i]`.
    pub(crate) fn add_member(&mut self, info: MemberInfo, launch: Launch, process: ManagedProcess) {
        if let Some(proxy) = &self.proxy {
            proxy.set_member_pid(self.members.len(), process.pid());
        }
        self.members.push(Member {
            name: info.name.clone(),
            launch,
            process,
            killed: false,
        });
        self.info.members.push(info);
    }

    pub(crate) fn info_mut(&mut self) -> &mut ClusterInfo {
        &mut self.info
    }

    /// Client URLs, one per member, e.g. `http://127.0.0.1:23790`.
    pub fn endpoints(&self) -> Vec<String> {
        self.info
            .members
            .iter()
            .map(|m| m.client_url.clone())
            .collect()
    }

    pub fn info(&self) -> &ClusterInfo {
        &self.info
    }

    /// Members' data directories (empty for attached clusters).
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        self.info
            .members
            .iter()
            .filter_map(|m| m.data_dir.clone())
            .collect()
    }

    /// True if coordbench started (and will stop) the members.
    pub fn is_provisioned(&self) -> bool {
        self.info.provisioned
    }

    /// Number of member processes coordbench manages (0 for attached clusters).
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// (name, pid) of every member process coordbench started.
    pub fn member_pids(&self) -> Vec<(String, u32)> {
        self.members
            .iter()
            .map(|m| (m.name.clone(), m.process.pid()))
            .collect()
    }

    /// Members' names, in member order.
    pub fn member_names(&self) -> Vec<String> {
        self.info.members.iter().map(|m| m.name.clone()).collect()
    }

    /// Pid of member `i`, if coordbench started it.
    pub fn member_pid(&self, i: usize) -> Option<u32> {
        self.members.get(i).map(|m| m.process.pid())
    }

    /// Stops every member: SIGTERM to one member at a time, last first, each waited for
    /// until a shared grace runs out, after which any member still running gets SIGKILL;
    /// then stops the delay proxy, unmounts sync-delay filesystems and removes the data.
    /// Idempotent.
    ///
    /// One at a time because a leader told to stop hands its leadership to a live follower
    /// first (etcd does): with every member terminated at once, that handover cannot finish
    /// and the leader would hold out for the whole grace and then be killed.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let deadline = Instant::now() + STOP_GRACE;
        for m in self.members.iter_mut().rev() {
            // Continue paused members so they can act on the SIGTERM.
            let _ = m.process.signal(libc::SIGTERM);
            let _ = m.process.signal(libc::SIGCONT);
            if m.process.wait_until(deadline).is_none() {
                m.process.kill();
            }
        }
        // Only now: a leader that is stopping still talks to its peers, and a member still
        // running would keep its files on the mount busy.
        if let Some(proxy) = self.proxy.as_mut() {
            proxy.stop();
        }
        self.mounts.clear();
        if let Some(root) = &self.data_root {
            if root.remove_on_stop {
                let _ = std::fs::remove_dir_all(&root.path);
            }
        }
    }

    fn member(&mut self, i: usize) -> Result<&mut Member, ProvisionError> {
        let count = self.members.len();
        if self.stopped {
            return Err(ProvisionError::Unsupported(format!(
                "cluster already stopped; cannot act on member {i}"
            )));
        }
        self.members.get_mut(i).ok_or_else(|| {
            ProvisionError::Unsupported(format!(
                "no managed member {i} (cluster has {count} managed members; attached clusters have none)"
            ))
        })
    }

    /// SIGKILLs member `i` (fault injection); [`check_alive`](Self::check_alive) then
    /// ignores it.
    pub fn kill_member(&mut self, i: usize) -> Result<(), ProvisionError> {
        let m = self.member(i)?;
        m.killed = true;
        m.process.kill();
        Ok(())
    }

    /// SIGKILLs members `members` at once (every signal is sent before any member is
    /// reaped, so none outlives the others by a reap), as [`kill_member`](Self::kill_member)
    /// does one.
    pub fn kill_members(&mut self, members: &[usize]) -> Result<(), ProvisionError> {
        for &i in members {
            let m = self.member(i)?;
            m.killed = true;
            let name = m.name.clone();
            m.process
                .signal(libc::SIGKILL)
                .map_err(|e| ProvisionError::io(format!("killing member {name}"), e))?;
        }
        for &i in members {
            self.member(i)?.process.kill();
        }
        Ok(())
    }

    /// Starts member `i` again after [`kill_member`](Self::kill_member), with the program,
    /// arguments and log file it was first started with; it keeps its data directory, so it
    /// rejoins with what it had persisted. Call from a long-lived thread (see
    /// [`process`]): the member dies with the thread that starts it.
    pub fn restart_member(&mut self, i: usize) -> Result<(), ProvisionError> {
        let m = self.member(i)?;
        if !m.killed {
            return Err(ProvisionError::Unsupported(format!(
                "member {} was not killed; only a killed member can be restarted",
                m.name
            )));
        }
        let log_file = m.process.log_file().to_path_buf();
        let process = m
            .launch
            .spawn(&log_file)
            .map_err(|e| ProvisionError::io(format!("restarting member {}", m.name), e))?;
        let pid = process.pid();
        // The killed process was reaped by kill_member; replacing it drops nothing alive.
        m.process = process;
        m.killed = false;
        self.info.members[i].pid = Some(pid);
        if let Some(proxy) = &self.proxy {
            proxy.set_member_pid(i, pid);
        }
        Ok(())
    }

    /// Freezes member `i` with SIGSTOP.
    pub fn pause_member(&mut self, i: usize) -> Result<(), ProvisionError> {
        let m = self.member(i)?;
        let name = m.name.clone();
        m.process
            .pause()
            .map_err(|e| ProvisionError::io(format!("pausing member {name}"), e))
    }

    /// Continues member `i` after [`pause_member`](Self::pause_member).
    pub fn resume_member(&mut self, i: usize) -> Result<(), ProvisionError> {
        let m = self.member(i)?;
        let name = m.name.clone();
        m.process
            .resume()
            .map_err(|e| ProvisionError::io(format!("resuming member {name}"), e))
    }

    /// Fails with the first member that exited without being told to (with its log tail).
    pub fn check_alive(&mut self) -> Result<(), ProvisionError> {
        if self.stopped {
            return Ok(());
        }
        let target = self.info.target.clone();
        for m in &mut self.members {
            if m.killed {
                continue;
            }
            if let Some(status) = m.process.try_exited() {
                return Err(ProvisionError::MemberExited {
                    member: format!("{target} member {}", m.name),
                    status: status.to_string(),
                    log_file: m.process.log_file().to_path_buf(),
                    log_tail: m.process.log_tail(LOG_TAIL_LINES),
                });
            }
        }
        Ok(())
    }
}

/// The group of each of `count` members, if `groups` puts every member in exactly one of
/// at least two non-empty groups; otherwise what is wrong with them.
fn groups_of(groups: &[Vec<usize>], count: usize) -> Result<Vec<usize>, String> {
    let mut group_of = vec![None; count];
    for (g, members) in groups.iter().enumerate() {
        for &m in members {
            match group_of.get_mut(m) {
                None => {
                    return Err(format!(
                    "a partition names member {m}, but the cluster has {count} members (0-based)"
                ))
                }
                Some(Some(_)) => return Err(format!("a partition names member {m} twice")),
                Some(slot) => *slot = Some(g),
            }
        }
    }
    if let Some(m) = group_of.iter().position(Option::is_none) {
        return Err(format!(
            "a partition must place every member in a group; member {m} is in none"
        ));
    }
    if groups.iter().filter(|g| !g.is_empty()).count() < 2 {
        return Err("a partition needs at least two non-empty groups".into());
    }
    Ok(group_of.into_iter().flatten().collect())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_groups_must_cover_every_member_once() {
        assert_eq!(groups_of(&[vec![1], vec![0, 2]], 3), Ok(vec![1, 0, 1]));
        for (groups, count) in [
            (vec![vec![0], vec![1]], 3),
            (vec![vec![0, 1], vec![1, 2]], 3),
            (vec![vec![0, 1, 2]], 3),
            (vec![vec![0, 1, 2], vec![]], 3),
            (vec![vec![0], vec![1, 5]], 3),
        ] {
            let err = groups_of(&groups, count).unwrap_err();
            assert!(!err.contains('\n'), "{groups:?}: {err}");
        }
    }
}
