//! Starts Redis as N independent `redis-server` instances on 127.0.0.1 (Debian's
//! redis-server package), each with its own port and data directory. They do not
//! replicate: `--cluster-size N` is the N independent masters Redlock needs, and set-nx
//! spreads its locks over them by name.
//!
//! Durability follows `--disk`: the append-only file is on, fsynced on every write
//! (`appendfsync always`, what etcd and ZooKeeper do before acknowledging) for tmpfs, disk
//! and the emulated disks (whose delay the sync-delay mount adds), and never fsynced by
//! Redis (`appendfsync no`, the kernel flushes when it likes) for nofsync. RDB snapshots
//! are off. Keyspace notifications for deletions and expiries are on, for the
//! `set-nx-notify` recipe's waiters. run.json records every setting.

use std::path::{Path, PathBuf};

use super::executable::find_executable;
use super::process::Launch;
use super::standalone::{self, Planned};
use super::{Cluster, ClusterInfo, ClusterSpec, DiskKind, ProvisionError};

const TARGET: &str = "redis";

/// `appendfsync` for a disk kind.
pub fn appendfsync(disk: DiskKind) -> &'static str {
    match disk {
        DiskKind::Nofsync => "no",
        _ => "always",
    }
}

/// Finds redis-server: an explicit path, else on PATH.
pub fn resolve_binary(explicit: Option<&Path>) -> Result<PathBuf, ProvisionError> {
    find_executable(explicit, "redis-server", "/usr/bin/redis-server").map_err(|tried| {
        ProvisionError::BinaryNotFound {
            binary: format!("redis-server ({})", tried.display()),
            hint: "install Debian's redis-server package (scripts/install-deps.sh), or attach with --endpoints".into(),
        }
    })
}

/// Starts `spec.size` instances and waits until each answers PING.
pub async fn start(spec: &ClusterSpec) -> Result<Cluster, ProvisionError> {
    spec.refuse_auto_compaction(TARGET)?;
    let binary = resolve_binary(None)?;
    let fsync = appendfsync(spec.disk);
    let fsync_note = match spec.disk {
        k if k.is_emulated() => format!("{fsync} ({})", spec.emulated_fsync_label()),
        DiskKind::Tmpfs => format!("{fsync} (no-op on tmpfs)"),
        _ => fsync.to_string(),
    };
    let info = ClusterInfo {
        target: TARGET.to_string(),
        size: spec.size,
        disk: Some(spec.disk),
        provisioned: true,
        binary: Some(binary.display().to_string()),
        version: None,
        source: None,
        members: Vec::new(),
        settings: vec![
            (
                "replication".into(),
                format!("none: {} independent instances", spec.size),
            ),
            ("appendonly".into(), "yes".into()),
            ("appendfsync".into(), fsync_note),
            ("save".into(), "\"\" (no RDB snapshots)".into()),
            ("notify-keyspace-events".into(), "Kgx".into()),
        ],
        election_timing: None,
    };
    let mut cluster = standalone::launch(spec, TARGET, info, true, |_, port, dir| {
        let args = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--dir",
            &dir.display().to_string(),
            "--appendonly",
            "yes",
            "--appendfsync",
            fsync,
            "--save",
            "",
            "--notify-keyspace-events",
            "Kgx",
            "--maxclients",
            "10000",
            "--logfile",
            "",
        ];
        Ok(Planned {
            launch: Launch {
                program: binary.clone(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env_remove: Vec::new(),
                run_as: None,
            },
            client_url: format!("redis://127.0.0.1:{port}"),
        })
    })?;
    let version = standalone::wait_ready(&mut cluster, TARGET, |endpoint| async move {
        coordbench_drivers::redis::server_version(&endpoint)
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}
