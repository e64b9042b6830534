//! The etcd API driven by Debian's real `etcdctl` (v3 API) against a server on 127.0.0.1
//! over a one-member in-process replicator. Skipped, with a note, where etcdctl is absent
//! (scripts/install-deps.sh installs it); under CI (`CI` set) that fails instead.

#[macro_use]
mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{within, Kind, TestServer};
use coordbench_etcd_api::ServeOptions;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const ETCDCTL: &str = "/usr/bin/etcdctl";

fn present() -> bool {
    coordbench_sim::tools::installed(ETCDCTL)
}

fn command(endpoint: &str, args: &[&str]) -> Command {
    let mut c = Command::new(ETCDCTL);
    c.env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoint,
            "--command-timeout=5s",
            "--dial-timeout=3s",
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs etcdctl to completion (optionally feeding stdin); returns stdout, panics on failure.
async fn ctl(endpoint: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = command(endpoint, args);
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn etcdctl");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).await.expect("write stdin");
        drop(pipe);
    }
    let out = within(&format!("etcdctl {args:?}"), 15, child.wait_with_output())
        .await
        .expect("etcdctl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "etcdctl {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A long-running etcdctl (watch, elect) whose output is read line by line.
struct Background {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Background {
    fn start(endpoint: &str, args: &[&str]) -> Background {
        let mut child = command(endpoint, args).spawn().expect("spawn etcdctl");
        let stdout = child.stdout.take().expect("piped stdout");
        Background {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// Reads lines until one equals `want`; returns everything read.
    async fn expect_line(&mut self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        within(&format!("line {want:?} (seen {seen:?})"), 10, async {
            while let Some(line) = self.lines.next_line().await.expect("read stdout") {
                let done = line == want;
                seen.push(line);
                if done {
                    return;
                }
            }
            panic!("etcdctl exited before printing {want:?}");
        })
        .await;
        seen
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = within("etcdctl exits", 5, self.child.wait()).await;
    }
}

async fn etcdctl_put_get_del_prefix_txn(kind: Kind) {
    if !present() {
        return;
    }
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let ep = server.endpoint();
    assert_eq!(ctl(&ep, &["put", "foo", "bar"], None).await, "OK\n");
    assert_eq!(ctl(&ep, &["get", "foo"], None).await, "foo\nbar\n");
    ctl(&ep, &["put", "dir/a", "1"], None).await;
    ctl(&ep, &["put", "dir/b", "2"], None).await;
    assert_eq!(
        ctl(&ep, &["get", "--prefix", "dir/"], None).await,
        "dir/a\n1\ndir/b\n2\n"
    );
    assert_eq!(
        ctl(
            &ep,
            &["get", "--prefix", "--keys-only", "--limit=1", "dir/"],
            None
        )
        .await,
        "dir/a\n\n"
    );
    assert_eq!(ctl(&ep, &["del", "--prefix", "dir/"], None).await, "2\n");
    let txn = "value(\"foo\") = \"bar\"\n\nput foo baz\n\nput foo nope\n\n";
    assert_eq!(ctl(&ep, &["txn"], Some(txn)).await, "SUCCESS\n\nOK\n");
    assert_eq!(ctl(&ep, &["txn"], Some(txn)).await, "FAILURE\n\nOK\n");
    assert_eq!(
        ctl(&ep, &["get", "foo", "--print-value-only"], None).await,
        "nope\n"
    );
    assert_eq!(ctl(&ep, &["del", "foo"], None).await, "1\n");
    assert_eq!(ctl(&ep, &["get", "foo"], None).await, "");
    server.stop().await;
}

async fn etcdctl_lease_grant_put_revoke(kind: Kind) {
    if !present() {
        return;
    }
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let ep = server.endpoint();
    let out = ctl(&ep, &["lease", "grant", "60"], None).await;
    // "lease 694d77aa9e6b0c3a granted with TTL(60s)"
    let id = out.split_whitespace().nth(1).expect("lease id").to_string();
    assert!(out.ends_with("granted with TTL(60s)\n"), "{out}");
    ctl(&ep, &["put", "--lease", &id, "leased", "v"], None).await;
    let ttl = ctl(&ep, &["lease", "timetolive", "--keys", &id], None).await;
    assert!(
        ttl.contains("granted with TTL(60s)") && ttl.contains("attached keys([leased])"),
        "{ttl}"
    );
    assert!(ctl(&ep, &["lease", "list"], None).await.contains(&id));
    assert!(ctl(&ep, &["lease", "keep-alive", "--once", &id], None)
        .await
        .contains("keepalived with TTL(60)"));
    assert_eq!(
        ctl(&ep, &["lease", "revoke", &id], None).await,
        format!("lease {id} revoked\n")
    );
    assert_eq!(ctl(&ep, &["get", "leased"], None).await, "");
    server.stop().await;
}

async fn etcdctl_lock_and_elect(kind: Kind) {
    if !present() {
        return;
    }
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let ep = server.endpoint();
    assert_eq!(
        ctl(&ep, &["lock", "mylock", "echo", "held"], None).await,
        "held\n"
    );
    // The lock was released: another holder gets it at once.
    assert_eq!(
        ctl(&ep, &["lock", "mylock", "echo", "again"], None).await,
        "again\n"
    );

    let mut leader = Background::start(&ep, &["elect", "myelection", "p1"]);
    let printed = leader.expect_line("p1").await;
    assert!(printed[0].starts_with("myelection/"), "{printed:?}");
    let mut observer = Background::start(&ep, &["elect", "--listen", "myelection"]);
    observer.expect_line("p1").await;
    // A second candidate waits; when the first leader's session ends, it takes over.
    let mut second = Background::start(&ep, &["elect", "myelection", "p2"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    leader.stop().await;
    // The killed leader's key lives until its lease is revoked: do that by hand.
    let lease = printed[0].trim_start_matches("myelection/").to_string();
    ctl(&ep, &["lease", "revoke", &lease], None).await;
    second.expect_line("p2").await;
    observer.expect_line("p2").await;
    second.stop().await;
    observer.stop().await;
    server.stop().await;
}

async fn etcdctl_watch_status_members(kind: Kind) {
    if !present() {
        return;
    }
    let server = TestServer::start(kind, ServeOptions::default()).await;
    let ep = server.endpoint();
    let mut watch = Background::start(&ep, &["watch", "k"]);
    // The watch is registered once etcdctl prints nothing yet; retry the put until seen.
    let seen = within("watch event", 10, async {
        loop {
            ctl(&ep, &["put", "k", "v1"], None).await;
            if let Ok(Ok(Some(line))) =
                tokio::time::timeout(Duration::from_millis(500), watch.lines.next_line()).await
            {
                break line;
            }
        }
    })
    .await;
    assert_eq!(seen, "PUT");
    watch.expect_line("v1").await;
    watch.stop().await;

    // "127.0.0.1:PORT, <id>, <version>, <db size>, <is leader>, <is learner>, <term>, ..."
    let status = ctl(&ep, &["endpoint", "status"], None).await;
    let me = server.target();
    let leads = if Some(me.id) == server.leader_id() {
        "true"
    } else {
        "false"
    };
    let expected = format!(", {:x}, 3.5.0-coordbench, ", me.id);
    assert!(status.contains(&expected), "{status}");
    assert!(status.contains(&format!(", {leads}, false, ")), "{status}");
    // With a URL endpoint, etcdctl 3.4 sends the URL as the HTTP/2 :authority; etcd accepts
    // that, and so must this server (src/authority.rs).
    let url = format!("http://{ep}");
    let status = ctl(&url, &["endpoint", "status"], None).await;
    assert!(
        status.starts_with(&format!("{url}, {:x}, ", me.id)),
        "{status}"
    );
    let health = command(&ep, &["endpoint", "health"])
        .output()
        .await
        .expect("health");
    let health = String::from_utf8_lossy(&health.stderr).into_owned()
        + &String::from_utf8_lossy(&health.stdout);
    assert!(health.contains("is healthy"), "{health}");
    // "<id>, started, <name>, <peer urls>, <client urls>, false"
    let members = ctl(&ep, &["member", "list"], None).await;
    assert_eq!(members.lines().count(), server.members(), "{members}");
    let expected = format!("{:x}, started, {}, {}, ", me.id, me.name, me.peer_urls[0]);
    assert!(members.contains(&expected), "{members}");
    server.stop().await;
}

on_both_backends!(
    etcdctl_put_get_del_prefix_txn,
    etcdctl_lease_grant_put_revoke,
    etcdctl_lock_and_elect,
    etcdctl_watch_status_members,
);
