//! Starts PostgreSQL as one server on 127.0.0.1 from Debian's postgresql package
//! (`initdb` and `postgres` under /usr/lib/postgresql/<version>/bin), with a data
//! directory per `--disk` and no replication (`--cluster-size 1`).
//!
//! PostgreSQL refuses to run as root. When coordbench runs as root, `initdb` and `postgres`
//! run as the `postgres` system user (the package creates it): the child switches to its
//! uid and gid before exec ([`RunAs`]), and the member directory is handed to it first.
//! Clients connect over TCP only (no Unix socket), as user `postgres` with trust
//! authentication on 127.0.0.1.
//!
//! Durability follows `--disk`: `fsync` and `synchronous_commit` are on (a commit is
//! acknowledged once its WAL is flushed) for tmpfs and disk, and off for nofsync (the
//! target's descriptor refuses the emulated disks). run.json records both.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::{Launch, RunAs};
use super::standalone::{self, Planned};
use super::{Cluster, ClusterInfo, ClusterSpec, DiskKind, ProvisionError};

const TARGET: &str = "postgres";
/// Where Debian installs the server binaries, one directory per major version.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";
/// Clients the server accepts: the workload's, the fault probes' and spares.
const MAX_CONNECTIONS: u32 = 500;

/// `fsync` and `synchronous_commit` for a disk kind.
pub fn durability(disk: DiskKind) -> &'static str {
    match disk {
        DiskKind::Nofsync => "off",
        _ => "on",
    }
}

/// The directory holding `initdb` and `postgres`: the newest version Debian installed.
pub fn resolve_bin_dir() -> Result<PathBuf, ProvisionError> {
    let newest = std::fs::read_dir(DEBIAN_LIB).ok().and_then(|entries| {
        entries
            .flatten()
            .filter_map(|e| {
                let version: u32 = e.file_name().to_str()?.parse().ok()?;
                Some((version, e.path().join("bin")))
            })
            .filter(|(_, bin)| bin.join("postgres").is_file() && bin.join("initdb").is_file())
            .max_by_key(|(v, _)| *v)
    });
    newest.map(|(_, bin)| bin).ok_or_else(|| ProvisionError::BinaryNotFound {
        binary: format!("postgres and initdb under {DEBIAN_LIB}/<version>/bin"),
        hint: "install Debian's postgresql package (scripts/install-deps.sh), or attach with --endpoints".into(),
    })
}

/// Who the server runs as: nobody else unless coordbench is root, then `postgres`.
fn server_user() -> Result<Option<RunAs>, ProvisionError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    RunAs::user("postgres").map(Some).ok_or_else(|| {
        ProvisionError::Unsupported(
            "postgres refuses to run as root and there is no `postgres` user to run it as; install Debian's postgresql package or run coordbench as another user".into(),
        )
    })
}

/// Starts the server and waits until it answers a query.
pub async fn start(spec: &ClusterSpec) -> Result<Cluster, ProvisionError> {
    spec.refuse_auto_compaction(TARGET)?;
    if spec.size != 1 {
        return Err(ProvisionError::Unsupported(
            "postgres starts one server (--cluster-size 1)".into(),
        ));
    }
    let bin = resolve_bin_dir()?;
    let user = server_user()?;
    let setting = durability(spec.disk);
    let info = ClusterInfo {
        target: TARGET.to_string(),
        size: 1,
        disk: Some(spec.disk),
        provisioned: true,
        binary: Some(bin.join("postgres").display().to_string()),
        version: None,
        source: None,
        members: Vec::new(),
        settings: vec![
            ("replication".into(), "none: one server".into()),
            ("fsync".into(), fsync_note(spec, setting)),
            ("synchronous_commit".into(), setting.into()),
            ("max_connections".into(), MAX_CONNECTIONS.to_string()),
            (
                "run-as".into(),
                user.map_or("coordbench's user".into(), |_| "postgres".into()),
            ),
        ],
        election_timing: None,
    };
    let mut cluster = standalone::launch(spec, TARGET, info, true, |_, port, dir| {
        init_data_dir(&bin, dir, user, &spec.work_dir)?;
        let args = vec![
            "-D".to_string(),
            dir.display().to_string(),
            "-p".into(),
            port.to_string(),
            "-c".into(),
            "listen_addresses=127.0.0.1".into(),
            "-c".into(),
            "unix_socket_directories=".into(),
            "-c".into(),
            format!("fsync={setting}"),
            "-c".into(),
            format!("synchronous_commit={setting}"),
            "-c".into(),
            format!("max_connections={MAX_CONNECTIONS}"),
        ];
        Ok(Planned {
            launch: Launch {
                program: bin.join("postgres"),
                args,
                env_remove: vec!["PGDATA".into(), "PGPORT".into()],
                run_as: user,
            },
            client_url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        })
    })?;
    let version = standalone::wait_ready(&mut cluster, TARGET, |endpoint| async move {
        coordbench_drivers::postgres::server_version(&endpoint)
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    cluster.info_mut().version = Some(version);
    Ok(cluster)
}

fn fsync_note(spec: &ClusterSpec, setting: &str) -> String {
    match spec.disk {
        k if k.is_emulated() => format!("{setting} ({})", spec.emulated_fsync_label()),
        DiskKind::Tmpfs => format!("{setting} (no-op on tmpfs)"),
        _ => setting.to_string(),
    }
}

/// Runs `initdb` into `dir` (as `user` when given, who then owns it): superuser
/// `postgres`, trust authentication, its output in the run's logs.
fn init_data_dir(
    bin: &Path,
    dir: &Path,
    user: Option<RunAs>,
    work_dir: &Path,
) -> Result<(), ProvisionError> {
    if let Some(u) = user {
        std::os::unix::fs::chown(dir, Some(u.uid), Some(u.gid)).map_err(|e| {
            ProvisionError::io(format!("handing {} to the postgres user", dir.display()), e)
        })?;
    }
    let log = work_dir.join("logs").join("postgres-initdb.log");
    std::fs::create_dir_all(work_dir.join("logs"))
        .map_err(|e| ProvisionError::io("creating the logs directory", e))?;
    let out = std::fs::File::create(&log)
        .map_err(|e| ProvisionError::io(format!("creating {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| ProvisionError::io("initdb log", e))?;
    let mut cmd = Command::new(bin.join("initdb"));
    cmd.args(["-D", &dir.display().to_string()])
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .env_remove("PGDATA")
        .stdout(out)
        .stderr(err);
    if let Some(u) = user {
        u.apply(&mut cmd);
    }
    let status = cmd
        .status()
        .map_err(|e| ProvisionError::io("running initdb", e))?;
    if !status.success() {
        return Err(ProvisionError::Unsupported(format!(
            "initdb failed ({status}) for {}; see {}",
            dir.display(),
            log.display()
        )));
    }
    Ok(())
}
