//! What the differential tests (tests/zk_differential.rs: ZooKeeper against zab,
//! tests/etcd_differential.rs: etcd against raft) share besides the shrinker
//! ([`super::shrink`]): the seeds a run takes from the environment, the first difference of
//! two transcripts, transcripts written out for diff(1), and the report of a difference
//! with the shrunk sequence that shows it.

use std::fmt::Display;
use std::path::Path;
use std::time::Duration;

use coordbench_lab::provision::{ClusterSpec, DiskKind};

/// The seeds of the random sequences: `var` as `N` or `A..B`, else `default`.
pub fn seeds(var: &str, default: &[u64]) -> Vec<u64> {
    let Ok(s) = std::env::var(var) else {
        return default.to_vec();
    };
    let bound = |x: &str| {
        x.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{var} is N or A..B, not {s:?}"))
    };
    match s.split_once("..") {
        Some((a, b)) => (bound(a)..bound(b)).collect(),
        None => vec![bound(&s)],
    }
}

/// The base port of a test's servers: `var` if set (scripts/differential-soak.sh moves
/// its runs off the ports of the test suite, which may be running beside it), else
/// `default`.
pub fn base_port(var: &str, default: u16) -> u16 {
    std::env::var(var).map_or(default, |p| {
        p.parse()
            .unwrap_or_else(|_| panic!("{var} is a port, not {p:?}"))
    })
}

/// A cluster of `size` members on tmpfs from `port` on, its data under `work`/`port`: the
/// shape of both servers of a differential pair.
pub fn member_spec(work: &Path, port: u16, size: usize) -> ClusterSpec {
    ClusterSpec {
        base_port: Some(port),
        ..ClusterSpec::new(
            size,
            DiskKind::Tmpfs,
            Duration::from_secs(10),
            work.join(port.to_string()),
        )
    }
}

/// The index of the first line where the transcripts differ.
pub fn first_difference(a: &[String], b: &[String]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
}

/// Writes each `(server, transcript)` under target/<dir>/ (for diff(1)); returns where.
pub fn dump(dir: &str, what: &str, transcripts: &[(&str, &[String])]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(dir);
    let name: String = what
        .chars()
        .take_while(|c| *c != '(')
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let written: Vec<String> = transcripts
        .iter()
        .map(|(who, t)| {
            let path = dir.join(format!("{}.{who}.txt", name.trim_matches('-')));
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&path, t.join("\n") + "\n"))
                .map_or_else(
                    |e| format!("(not written: {e})"),
                    |()| path.display().to_string(),
                )
        })
        .collect();
    written.join(" ")
}

/// The two lines that differ at `index`, named by their servers.
pub fn lines_at(index: usize, a: (&str, &[String]), b: (&str, &[String])) -> String {
    let width = a.0.len().max(b.0.len()) + 1;
    let line = |(who, t): (&str, &[String])| {
        let l = t.get(index).map_or("(no line)", String::as_str);
        format!("  {:width$} {l}", format!("{who}:"))
    };
    format!("step {index}\n{}\n{}", line(a), line(b))
}

/// A shrunk sequence, one step a line.
pub fn listing<S: Display>(steps: &[S]) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  #{i} {s}"))
        .collect::<Vec<_>>()
        .join("\n")
}
