//! Seeded random generation of commands for the property tests.
#![allow(dead_code)]

use coordbench_tree::*;

/// The shared property-test generator (engines/sim): the stream these tests were written
/// against.
pub use coordbench_sim::PropRng as Rng;

/// Paths that collide often: parents, children, grandchildren, and invalid ones.
pub const PATHS: &[&str] = &[
    "/a",
    "/a/b",
    "/a/b/c",
    "/a/d",
    "/b",
    "/b/x",
    "/c",
    "/",
    "/zookeeper",
    "/bad/",
    "//x",
];
/// Prefixes for sequential creates.
pub const PREFIXES: &[&str] = &["/a/s-", "/s-", "/b/", "/a/b/q"];

/// Data of up to 3 bytes, or null (as a client may send it) one time in five.
pub fn data(rng: &mut Rng) -> Option<Vec<u8>> {
    if rng.below(5) == 0 {
        return None;
    }
    Some(
        (0..rng.below(4))
            .map(|_| b'0' + rng.below(4) as u8)
            .collect(),
    )
}

pub fn version(rng: &mut Rng, tree: &DataTree, path: &str) -> i32 {
    match rng.below(4) {
        0 => -1,
        1 => rng.between(0, 3) as i32,
        _ => tree.stat(path).map_or(-1, |s| s.version),
    }
}

pub fn mode(rng: &mut Rng) -> CreateMode {
    *rng.pick(&[
        CreateMode::Persistent,
        CreateMode::Persistent,
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
        CreateMode::Container,
        CreateMode::PersistentWithTtl,
    ])
}

pub fn op(rng: &mut Rng, tree: &DataTree) -> Op {
    let path = rng.pick(PATHS).to_string();
    match rng.below(10) {
        0..=4 => {
            let mode = mode(rng);
            let path = if mode.is_sequential() {
                rng.pick(PREFIXES).to_string()
            } else {
                path
            };
            Op::Create {
                path,
                data: data(rng),
                mode,
                ttl_ms: if mode.is_ttl() { rng.between(1, 50) } else { 0 },
                acl: vec![Acl::open()],
            }
        }
        5 | 6 => Op::Delete {
            version: version(rng, tree, &path),
            path,
        },
        7 | 8 => Op::SetData {
            data: data(rng),
            version: version(rng, tree, &path),
            path,
        },
        _ => Op::Check {
            version: version(rng, tree, &path),
            path,
        },
    }
}

/// A session id: a live one mostly, sometimes none or a dead one.
pub fn session(rng: &mut Rng, tree: &DataTree) -> i64 {
    let live: Vec<i64> = tree.sessions().map(|(id, _)| id).collect();
    match rng.below(10) {
        0..=2 => 0,
        3 => rng.between(1, 5),
        _ if live.is_empty() => 0,
        _ => *rng.pick(&live),
    }
}

/// A random command; `now` advances.
pub fn command(rng: &mut Rng, tree: &DataTree, now: &mut i64) -> Command {
    *now += rng.between(0, 20);
    let now_ms = *now;
    match rng.below(20) {
        0 | 1 => Command::CreateSession {
            timeout_ms: rng.between(10, 100) as i32,
            password: vec![rng.below(256) as u8; 16],
            now_ms,
        },
        2 => Command::CloseSession {
            session: session(rng, tree),
        },
        3 => Command::TouchSessions {
            sessions: vec![session(rng, tree), session(rng, tree)],
            now_ms,
        },
        4 => Command::ExpireSessions {
            sessions: tree.expired_sessions(now_ms + rng.between(-20, 20)),
            now_ms,
        },
        5 => Command::RenewAllSessions { now_ms },
        6 => Command::Reap {
            paths: {
                let mut p = tree.reap_candidates(now_ms);
                p.push(rng.pick(PATHS).to_string());
                p
            },
            now_ms,
        },
        7..=9 => Command::Multi {
            session: session(rng, tree),
            now_ms,
            ops: (0..rng.below(4)).map(|_| op(rng, tree)).collect(),
            auth: vec![],
        },
        _ => Command::Write {
            session: session(rng, tree),
            now_ms,
            op: op(rng, tree),
            auth: vec![],
        },
    }
}
