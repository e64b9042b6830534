//! What the launchers of independent servers (redis instances, the postgres server) share:
//! a member per server with its own port and data directory, and readiness as every
//! member answering its protocol (no leader to wait for).

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::process::Launch;
use super::{disk, ports, Cluster, ClusterInfo, ClusterSpec, MemberInfo, ProvisionError};

/// How long members get to answer after they start.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Between readiness polls.
const POLL: Duration = Duration::from_millis(50);

/// One member to start: its launch, given its port and data directory.
pub(super) struct Planned {
    pub launch: Launch,
    pub client_url: String,
}

/// Starts `spec.size` members of `target` (`info` describes the cluster, with no members
/// yet); `plan(i, port, data_dir)` says how member i starts, `prepare(data_dir)` readies its
/// data directory first (e.g. initdb). On any error everything started is stopped.
pub(super) fn launch(
    spec: &ClusterSpec,
    target: &str,
    info: ClusterInfo,
    server_skips_sync: bool,
    mut plan: impl FnMut(usize, u16, &std::path::Path) -> Result<Planned, ProvisionError>,
) -> Result<Cluster, ProvisionError> {
    let ports = ports::allocate(spec.base_port, spec.size)?;
    let root = disk::create_data_root(spec, target)?;
    let root_path = root.path.clone();
    let mut cluster = Cluster::provisioned(info, Some(root), spec);
    for (i, &port) in ports.iter().enumerate() {
        let name = format!("m{}", i + 1);
        let policy = spec.sync_policy(server_skips_sync);
        let data_dir: PathBuf = disk::member_dir(
            &mut cluster,
            &root_path,
            &format!("{target}-{name}"),
            policy,
        )?;
        let log_file = spec
            .work_dir
            .join("logs")
            .join(format!("{target}-{name}.log"));
        let planned = plan(i, port, &data_dir)?;
        let process = planned
            .launch
            .spawn(&log_file)
            .map_err(|e| ProvisionError::io(format!("starting {target} member {name}"), e))?;
        let member = MemberInfo {
            name,
            client_url: planned.client_url,
            peer_url: None,
            data_dir: Some(data_dir),
            log_file: Some(log_file),
            pid: Some(process.pid()),
        };
        cluster.add_member(member, planned.launch, process);
    }
    Ok(cluster)
}

/// Waits until every member answers `ask(endpoint)` (its server version); returns the
/// first member's version.
pub(super) async fn wait_ready<F, Fut>(
    cluster: &mut Cluster,
    target: &str,
    ask: F,
) -> Result<String, ProvisionError>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<String, String>>,
{
    let started = Instant::now();
    let endpoints = cluster.endpoints();
    let mut versions: Vec<Option<String>> = vec![None; endpoints.len()];
    loop {
        cluster.check_alive()?;
        let mut detail = String::new();
        for (i, endpoint) in endpoints.iter().enumerate() {
            if versions[i].is_some() {
                continue;
            }
            match tokio::time::timeout(Duration::from_secs(2), ask(endpoint.clone())).await {
                Ok(Ok(version)) => versions[i] = Some(version),
                Ok(Err(e)) => detail = format!("{endpoint}: {e}"),
                Err(_) => detail = format!("{endpoint}: no answer within 2s"),
            }
        }
        if versions.iter().all(Option::is_some) {
            return Ok(versions[0].clone().unwrap_or_default());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(ProvisionError::NotReady {
                target: target.to_string(),
                waited: READY_TIMEOUT,
                detail,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
