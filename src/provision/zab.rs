//! Starts the built-in Zab engine as a local cluster: N `coordbench serve zab` processes
//! (launched like the Raft engine's, see `provision::raft`), ready once every member
//! answers ZooKeeper's four-letter words as a real ensemble would: `ruok` is `imok`
//! everywhere and `srvr` shows exactly one leader and followers otherwise.

use super::raft::{launch_members, RaftOptions};
use super::{zookeeper, Cluster, ClusterSpec, ProvisionError};

const TARGET: &str = "zab";

/// Starts `spec.size` members; on any error everything started so far is stopped.
pub async fn start(spec: &ClusterSpec, opts: &RaftOptions) -> Result<Cluster, ProvisionError> {
    // ZooKeeper clients take plain host:port connect strings.
    let mut cluster = launch_members(spec, opts, TARGET, str::to_string)?;
    let version = zookeeper::wait_ready(&mut cluster).await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}
