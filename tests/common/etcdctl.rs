//! Driving Debian's real `etcdctl` (v3 API, /usr/bin/etcdctl) as a client: one-shot
//! commands whose stdout is returned, and long-running ones (watch, elect) read line by
//! line. Every run is bounded and killed when dropped.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use super::within;

pub const ETCDCTL: &str = "/usr/bin/etcdctl";
/// Bound on one etcdctl command (its own --command-timeout is 5 s).
const RUN_BOUND: Duration = Duration::from_secs(15);
/// Bound on waiting for a line from a long-running etcdctl.
const LINE_BOUND: Duration = Duration::from_secs(10);

/// True if etcdctl is installed; otherwise prints why the caller skips.
pub fn present() -> bool {
    coordbench_sim::tools::installed(ETCDCTL)
}

/// `etcdctl --endpoints <endpoints> <args>` with the v3 API, short timeouts, piped output.
pub fn command(endpoints: &str, args: &[&str]) -> Command {
    let mut c = Command::new(ETCDCTL);
    c.env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoints,
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

/// Runs etcdctl to completion, feeding `stdin` if given: `Ok(stdout)` if it exits 0, else
/// `Err` with its last `Error: ...` line (how etcdctl reports a refused request), or all of
/// stderr.
pub async fn ctl_outcome(
    endpoints: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, String> {
    let mut cmd = command(endpoints, args);
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn etcdctl");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).await.expect("write stdin");
        drop(pipe);
    }
    let what = format!("etcdctl {args:?}");
    let out = within(RUN_BOUND, &what, child.wait_with_output())
        .await
        .expect("etcdctl runs");
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let error = stderr.lines().rev().find(|l| l.starts_with("Error:"));
    Err(error.map_or(stderr.clone(), str::to_string))
}

/// Runs etcdctl to completion, feeding `stdin` if given; returns stdout and panics (with
/// the error) unless it exits 0.
pub async fn ctl(endpoints: &str, args: &[&str], stdin: Option<&str>) -> String {
    ctl_outcome(endpoints, args, stdin)
        .await
        .unwrap_or_else(|e| panic!("etcdctl {args:?} failed: {e}"))
}

/// A long-running etcdctl (watch, elect) whose stdout is read line by line.
pub struct Background {
    child: Child,
    pub lines: Lines<BufReader<ChildStdout>>,
}

impl Background {
    pub fn start(endpoints: &str, args: &[&str]) -> Background {
        let mut child = command(endpoints, args).spawn().expect("spawn etcdctl");
        let stdout = child.stdout.take().expect("piped stdout");
        Background {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next line, if one arrives within `bound`.
    pub async fn line_within(&mut self, bound: Duration) -> Option<String> {
        match tokio::time::timeout(bound, self.lines.next_line()).await {
            Ok(Ok(line)) => line,
            _ => None,
        }
    }

    /// Reads lines until one equals `want`; returns everything read.
    pub async fn expect_line(&mut self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(LINE_BOUND, async {
            while let Some(line) = self.lines.next_line().await.expect("read stdout") {
                let done = line == want;
                seen.push(line);
                if done {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            found == Ok(true),
            "etcdctl did not print {want:?} within {LINE_BOUND:?} (or exited); printed {seen:?}"
        );
        seen
    }

    /// Kills etcdctl (SIGKILL, as a crashed client) and reaps it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        within(Duration::from_secs(5), "etcdctl exits", self.child.wait())
            .await
            .expect("reap etcdctl");
    }
}
