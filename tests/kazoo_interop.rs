//! A second client library against zab, checked on real ZooKeeper first: Python's kazoo
//! (tests/interop/kazoo_session.py, installed into target/interop-venv by
//! scripts/install-deps.sh) authenticates with digest, creates a node with a digest ACL
//! it computes itself, sees NoAuth without the credentials, and closes eleven sessions:
//! against ZooKeeper 3.8 and zab alike, kazoo reports no dropped connection and each
//! session's ephemeral node goes. (Whether zab answered a close before closing the
//! connection is a race kazoo sees only sometimes; tests/wire.rs in engines/zk-api checks
//! the answer-then-close order at the byte level.)

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::within;
use coordbench_lab::provision::{zab, zookeeper, Cluster, ClusterSpec, DiskKind};
use tempfile::TempDir;

const BOUND: Duration = Duration::from_secs(90);

/// The interop venv's python, or `None` (then the test says it skipped; under `CI` it
/// fails instead, so CI cannot pass without running it).
fn python() -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/interop-venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing: run scripts/install-deps.sh",
        python.display()
    );
    eprintln!(
        "skipped: {} is missing (scripts/install-deps.sh installs it)",
        python.display()
    );
    None
}

async fn kazoo_session(cluster: &Cluster, python: &PathBuf, what: &str) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/kazoo_session.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .arg(cluster.endpoints().join(","))
        .kill_on_drop(true);
    let out = within(BOUND, "the kazoo session", command.output())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spec(work: &TempDir, base_port: u16) -> ClusterSpec {
    ClusterSpec {
        base_port: Some(base_port),
        ..ClusterSpec::new(
            1,
            DiskKind::Tmpfs,
            Duration::from_secs(10),
            work.path().to_path_buf(),
        )
    }
}

// Base ports (32100-32699) lie between the provisioner's free-port range (20000-32000) and
// the kernel's ephemeral range (from 32768): no picked port and no outgoing connection of
// a concurrently running test can hold them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_closes_cleanly_on_zookeeper() {
    let Some(python) = python() else { return };
    let work = TempDir::new().unwrap();
    let (spec, options) = (spec(&work, 32600), Default::default());
    let start = zookeeper::start(&spec, &options);
    let cluster = within(BOUND, "starting ZooKeeper", start).await.unwrap();
    kazoo_session(&cluster, &python, "ZooKeeper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_closes_cleanly_on_zab() {
    let Some(python) = python() else { return };
    let work = TempDir::new().unwrap();
    let (spec, options) = (spec(&work, 32650), common::raft_options());
    let start = zab::start(&spec, &options);
    let cluster = within(BOUND, "starting zab", start).await.unwrap();
    kazoo_session(&cluster, &python, "zab").await;
}
