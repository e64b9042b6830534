//! The ZooKeeper protocol driven by Debian's real `zkCli.sh` (ZooKeeper 3.8's Java client)
//! against a server on 127.0.0.1 over a one-member replicator. Skipped, with a note, where
//! zkCli.sh is absent (scripts/install-deps.sh installs Debian's zookeeper package); under
//! CI (`CI` set) that fails instead. JVM
//! start-up is slow, so there are three invocations: two one-command runs and one scripted
//! session on standard input.

mod common;

use std::process::Stdio;

use common::{within, TestServer};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";

fn present() -> bool {
    coordbench_sim::tools::installed(ZKCLI)
}

/// Runs zkCli.sh with `args` (and `stdin`, if any) to completion; returns stdout + stderr.
async fn zkcli(server: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = Command::new(ZKCLI);
    cmd.arg("-server")
        .arg(server)
        .args(args)
        // Quiet, small and quick to start: a client needs little of the JVM.
        .env(
            "CLIENT_JVMFLAGS",
            "-Xmx128m -XX:TieredStopAtLevel=1 -Xshare:auto",
        )
        .env("ZOO_LOG4J_PROP", "ERROR,CONSOLE")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn zkCli.sh");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).await.expect("write stdin");
        drop(pipe);
    }
    let out = within(&format!("zkCli.sh {args:?}"), 40, child.wait_with_output())
        .await
        .expect("zkCli.sh runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn has_line(out: &str, line: &str) -> bool {
    out.lines().any(|l| l.trim_end() == line)
}

/// The must-show: `zkCli.sh -server ADDR create /a x`, then `get /a` prints x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_then_get() {
    if !present() {
        return;
    }
    let server = TestServer::start(common::fast_options()).await;
    let addr = server.endpoint();
    let out = zkcli(&addr, &["create", "/a", "x"], None).await;
    assert!(has_line(&out, "Created /a"), "{out}");
    let out = zkcli(&addr, &["get", "/a"], None).await;
    assert!(has_line(&out, "x"), "{out}");
    server.stop().await;
}

/// One interactive session: every create mode, ls, get, set with a version (and a stale
/// one), stat, delete, deleteall, and `get -w` whose watch the next set fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_session() {
    if !present() {
        return;
    }
    let server = TestServer::start(common::fast_options()).await;
    let script = "create /zc plain
create -e /zc/e eph
create -s /zc/s- seq
create -e -s /zc/es- eseq
ls /zc
get /zc
set -v 0 /zc changed
set -v 0 /zc again
stat /zc
get -w /zc
set /zc final
delete /zc/s-0000000001
create /zd x
create /zd/a
create /zd/a/b
deleteall /zd
ls /
quit
";
    let out = zkcli(&server.endpoint(), &[], Some(script)).await;
    for line in [
        "Created /zc",
        "Created /zc/e",
        "Created /zc/s-0000000001",
        "Created /zc/es-0000000002",
        "[e, es-0000000002, s-0000000001]",
        "plain",
        "version No is not valid : /zc",
        "dataVersion = 1",
        "cversion = 3",
        "numChildren = 3",
        "ephemeralOwner = 0x0",
        "changed",
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/zc",
        "Created /zd/a/b",
        "[zc, zookeeper]",
    ] {
        assert!(has_line(&out, line), "missing {line:?} in:\n{out}");
    }
    // What the session left: quit closed it, so its ephemerals are gone too.
    let zk = server.client(std::time::Duration::from_secs(2)).await;
    assert_eq!(zk.get_data("/zc").await.unwrap().0, b"final");
    assert!(zk.list_children("/zc").await.unwrap().is_empty());
    assert!(zk.check_stat("/zd").await.unwrap().is_none());
    server.stop().await;
}
