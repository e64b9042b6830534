//! Starts the built-in Zab engine as a local cluster: N `coordbench serve zab` processes
//! (launched like the Raft engine's, see `provision::raft`), ready once every member
//! answers ZooKeeper's four-letter words as a real ensemble would: `ruok` is `imok`
//! everywhere and `srvr` shows exactly one leader and followers otherwise. Secured
//! (`--secure`), members require digest auth and serve clients over TLS only.

use super::raft::{launch_members, RaftOptions};
use super::zookeeper::Timing;
use super::{zookeeper, Cluster, ClusterSpec, ProvisionError};

const TARGET: &str = "zab";

/// Transactions between a zab member's snapshots in the clusters the lab starts:
/// ZooKeeper's snapCount, the engine's default, passed explicitly so the record states what
/// ran.
pub const ZAB_SNAPSHOT_EVERY: u64 = 100_000;

/// Starts `spec.size` members; on any error everything started so far is stopped.
pub async fn start(spec: &ClusterSpec, opts: &RaftOptions) -> Result<Cluster, ProvisionError> {
    spec.refuse_auto_compaction(TARGET)?;
    // Session timing follows the TTL exactly as for a real ZooKeeper ensemble, so session
    // expiry figures compare.
    let timing = Timing::for_ttl(spec.ttl);
    let mut session_args = vec![
        format!("--session-tick={}ms", timing.tick_ms),
        format!("--min-session-timeout={}ms", timing.min_session_timeout_ms),
        format!("--max-session-timeout={}ms", timing.max_session_timeout_ms),
        // Every client connects from 127.0.0.1, as for ZooKeeper (maxClientCnxns=0).
        "--max-client-cnxns=0".to_string(),
    ];
    if opts.secure {
        session_args.push("--enforce-auth".into());
    }
    session_args.extend(super::raft::serve_tls_args(opts.tls.as_ref()));
    let snapshot_every = spec.snapshot_every.unwrap_or(ZAB_SNAPSHOT_EVERY);
    session_args.push(format!("--snapshot-every={snapshot_every}"));
    // ZooKeeper clients take plain host:port connect strings.
    let mut cluster = launch_members(spec, opts, TARGET, &session_args, str::to_string).await?;
    let settings = &mut cluster.info_mut().settings;
    settings.extend(super::raft::snapshot_settings(snapshot_every));
    if opts.secure {
        settings.push(("enforce.auth.schemes".into(), "digest".into()));
    }
    if opts.tls.is_some() {
        settings.push((
            "client-transport".into(),
            "TLS only, client certificates required (CA generated per run); peers plain TCP on 127.0.0.1".into(),
        ));
    }
    settings.push(("tickTime-ms".into(), timing.tick_ms.to_string()));
    settings.push((
        "sessionTimeout-ms".into(),
        timing.session_timeout_ms.to_string(),
    ));
    let version = zookeeper::wait_ready(&mut cluster, opts.zk_client.as_ref()).await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}
