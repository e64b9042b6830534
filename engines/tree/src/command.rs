//! What a member proposes ([`Command`]), what applying it returns ([`Applied`]), and the
//! binary codec for commands.
//!
//! Commands travel through the log as opaque bytes: [`Command::encode`] /
//! [`Command::decode`] use postcard after a two-byte format mark ([`COMMAND_MARK`], then
//! [`COMMAND_FORMAT`]). Format 1 had no mark (its first byte is the variant index, below 8)
//! and could not say null data; its entries are refused with an error naming the format,
//! never read as something else (see ARCHITECTURE.md: a cluster's members run one build).
//! Every input a command needs is inside it, the
//! proposer's wall clock (`now_ms`) included, so applying it is a pure function of
//! (state, zxid, command).

use serde::{Deserialize, Serialize};

use crate::acl::{Acl, Id};
use crate::error::{CodecError, TreeError};
use crate::path;
use crate::types::{CreateMode, Stat, WatchEvent, MAX_TTL_MS};

/// A replicated change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Opens a session; its id is the command's zxid. `password` is the proposer's random
    /// secret that a reconnecting client must present; `timeout_ms` is already negotiated.
    CreateSession {
        timeout_ms: i32,
        #[serde(with = "serde_bytes")]
        password: Vec<u8>,
        now_ms: i64,
    },
    /// Ends a session (the client's closeSession), deleting its ephemerals.
    CloseSession { session: i64 },
    /// Renews sessions that showed activity on the proposing member: each deadline
    /// becomes at least `now_ms + timeout`. Unknown ids are reported back.
    TouchSessions { sessions: Vec<i64>, now_ms: i64 },
    /// A new leader's first command: every deadline becomes `now_ms + timeout`, so no
    /// session expires for the leaderless interval and deadlines move onto its clock.
    RenewAllSessions { now_ms: i64 },
    /// The leader's expiry decision: ends each listed session whose deadline is still
    /// `<= now_ms` (one touched in between survives), deleting its ephemerals.
    ExpireSessions { sessions: Vec<i64>, now_ms: i64 },
    /// One write by `session` (0: no session, for tools and tests). `auth` are the ids
    /// the session's connection authenticated (addauth, its address): ZooKeeper checks
    /// ACLs against the request's auth info, so it travels with the request.
    Write {
        session: i64,
        now_ms: i64,
        op: Op,
        auth: Vec<Id>,
    },
    /// ZooKeeper's multi: all ops or none, at one zxid.
    Multi {
        session: i64,
        now_ms: i64,
        ops: Vec<Op>,
        auth: Vec<Id>,
    },
    /// The leader's container and TTL check: deletes each listed node that is still due
    /// (an empty container that has had children; an empty TTL node unmodified for its TTL).
    Reap { paths: Vec<String>, now_ms: i64 },
}

/// A write operation, alone or in a multi.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `path` is the prefix for sequential modes; `ttl_ms` only for TTL modes (else 0);
    /// `acl` as the client sent it (checked and expanded at apply).
    Create {
        path: String,
        /// `None`: null data (jute length -1), kept and read back as null.
        #[serde(with = "serde_bytes")]
        data: Option<Vec<u8>>,
        mode: CreateMode,
        ttl_ms: i64,
        acl: Vec<Acl>,
    },
    /// `version` -1 matches any.
    Delete { path: String, version: i32 },
    SetData {
        path: String,
        /// `None`: null data (jute length -1), kept and read back as null.
        #[serde(with = "serde_bytes")]
        data: Option<Vec<u8>>,
        version: i32,
    },
    /// Fails unless the node exists with this version (-1: exists).
    Check { path: String, version: i32 },
    /// Replaces a node's ACL; `version` is the expected aversion (-1 matches any).
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// An op of a multi that ZooKeeper's server fails on when it reaches it (the proposer
    /// found it malformed the way ZooKeeper's checks throw on): applying it fails with
    /// `error`, unless an earlier op of the multi failed first, as in ZooKeeper, which
    /// stops looking at a multi's ops after the first failure.
    Refuse { error: TreeError },
}

impl Op {
    /// The checks that need no state; apply repeats them.
    pub fn validate(&self) -> Result<(), TreeError> {
        match self {
            Op::Create {
                path, mode, ttl_ms, ..
            } => {
                if mode.is_sequential() {
                    path::validate_sequential(path)?;
                } else {
                    path::validate(path)?;
                }
                let ttl_ok = if mode.is_ttl() {
                    (1..=MAX_TTL_MS).contains(ttl_ms)
                } else {
                    *ttl_ms == 0
                };
                if !ttl_ok {
                    return Err(TreeError::BadArguments(format!(
                        "ttl {ttl_ms} is invalid for mode {mode:?}"
                    )));
                }
                Ok(())
            }
            Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. }
            | Op::SetAcl { path, .. } => path::validate(path),
            Op::Refuse { .. } => Ok(()),
        }
    }
}

/// The result of one successful op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpResult {
    /// The created path (with its sequence number) and the new node's stat.
    Create {
        path: String,
        stat: Stat,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
    SetAcl {
        stat: Stat,
    },
}

/// How a multi ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MultiOutcome {
    Committed(Vec<OpResult>),
    /// Op `index` failed with `error`; nothing changed.
    Aborted {
        index: usize,
        error: TreeError,
    },
}

/// The successful answer to a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    SessionCreated {
        session: i64,
        timeout_ms: i32,
    },
    SessionClosed {
        existed: bool,
    },
    Touched {
        missing: Vec<i64>,
    },
    RenewedAll {
        sessions: usize,
    },
    Expired {
        sessions: Vec<i64>,
    },
    Op(OpResult),
    /// A multi, committed or aborted (an aborted multi is not a failed command: ZooKeeper
    /// reports it per op).
    Multi(MultiOutcome),
    Reaped {
        paths: Vec<String>,
    },
}

/// Outcome of applying one command, identical on every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The command's zxid.
    pub zxid: i64,
    pub result: Result<Response, TreeError>,
    /// Changes that fire watches, in the order they were made.
    pub events: Vec<WatchEvent>,
    /// Sessions that ended (closed or expired): their connections should be closed.
    pub ended_sessions: Vec<i64>,
}

/// First byte of an encoded command since format 2: no format 1 command starts with it (a
/// format 1 entry starts with its variant index, 0 to 7).
pub const COMMAND_MARK: u8 = 0xCB;
/// Format 2: `Op::Create` and `Op::SetData` data may be null.
pub const COMMAND_FORMAT: u8 = 2;

impl Command {
    /// The bytes to put in a log entry.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising to a Vec cannot fail: every sequence has a known length.
        postcard::to_extend(self, vec![COMMAND_MARK, COMMAND_FORMAT])
            .expect("postcard serialisation of Command is infallible")
    }

    /// Reads a log entry written by [`Command::encode`]; trailing bytes are an error, and
    /// so is another format's entry.
    pub fn decode(bytes: &[u8]) -> Result<Command, CodecError> {
        let body = match bytes {
            [COMMAND_MARK, COMMAND_FORMAT, body @ ..] => body,
            [COMMAND_MARK, other, ..] => {
                return Err(CodecError::Decode(format!(
                    "command format {other} (this build reads format {COMMAND_FORMAT})"
                )))
            }
            [first, ..] if *first < 8 => {
                return Err(CodecError::Decode(format!(
                    "command format 1, written by an older build (this build reads format \
                     {COMMAND_FORMAT}: null data); run every member on one build"
                )))
            }
            _ => return Err(CodecError::Decode("not a command".into())),
        };
        match postcard::take_from_bytes::<Command>(body) {
            Ok((cmd, [])) => Ok(cmd),
            Ok((_, rest)) => Err(CodecError::Decode(format!("{} trailing bytes", rest.len()))),
            Err(e) => Err(CodecError::Decode(e.to_string())),
        }
    }

    /// The checks that need no state, for a proposer to refuse bad requests without
    /// using the log. Apply repeats them.
    pub fn validate(&self) -> Result<(), TreeError> {
        match self {
            Command::CreateSession { timeout_ms, .. } if *timeout_ms <= 0 => Err(
                TreeError::BadArguments(format!("session timeout {timeout_ms}")),
            ),
            Command::Write { op, .. } => op.validate(),
            Command::Multi { ops, .. } => ops.iter().try_for_each(Op::validate),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_round_trip() {
        let cmds = vec![
            Command::CreateSession {
                timeout_ms: 30_000,
                password: vec![7; 16],
                now_ms: 1,
            },
            Command::Write {
                session: 5,
                now_ms: i64::MAX,
                op: Op::Create {
                    path: "/a/b-".into(),
                    data: Some(vec![0; 300]),
                    mode: CreateMode::PersistentSequentialWithTtl,
                    ttl_ms: 10,
                    acl: vec![Acl::open()],
                },
                auth: vec![Id::new("digest", "u:h")],
            },
            Command::Multi {
                session: 0,
                now_ms: 0,
                auth: vec![],
                ops: vec![
                    Op::SetAcl {
                        path: "/a".into(),
                        acl: vec![Acl::open()],
                        version: 3,
                    },
                    Op::Check {
                        path: "/".into(),
                        version: -1,
                    },
                    Op::Delete {
                        path: "/x".into(),
                        version: 3,
                    },
                ],
            },
            Command::Multi {
                session: 1,
                now_ms: 2,
                auth: vec![],
                ops: vec![
                    Op::SetData {
                        path: "/null".into(),
                        data: None,
                        version: -1,
                    },
                    Op::SetData {
                        path: "/empty".into(),
                        data: Some(vec![]),
                        version: -1,
                    },
                ],
            },
            Command::ExpireSessions {
                sessions: vec![1, i64::MAX, i64::MIN],
                now_ms: -5,
            },
            Command::Reap {
                paths: vec!["/c".into()],
                now_ms: 9,
            },
        ];
        for cmd in cmds {
            let bytes = cmd.encode();
            assert_eq!(Command::decode(&bytes), Ok(cmd));
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Command::decode(&longer).is_err());
            assert!(Command::decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }

    #[test]
    fn null_and_empty_data_stay_distinct_and_format_1_is_refused() {
        let set = |data| Command::Write {
            session: 0,
            now_ms: 0,
            op: Op::SetData {
                path: "/a".into(),
                data,
                version: -1,
            },
            auth: vec![],
        };
        let (null, empty) = (set(None), set(Some(vec![])));
        assert_ne!(null.encode(), empty.encode());
        assert_eq!(Command::decode(&null.encode()), Ok(null.clone()));
        assert_eq!(Command::decode(&empty.encode()), Ok(empty));
        // An entry as format 1 wrote it (no mark) is refused, never misread.
        let unmarked = postcard::to_allocvec(&null).unwrap();
        let err = Command::decode(&unmarked).unwrap_err().to_string();
        assert!(err.contains("format 1"), "{err}");
        let future = [COMMAND_MARK, COMMAND_FORMAT + 1, 0];
        assert!(Command::decode(&future).is_err());
    }

    #[test]
    fn garbage_does_not_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2000usize {
            let bytes: Vec<u8> = (0..len % 64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = Command::decode(&bytes);
        }
    }

    #[test]
    fn validation() {
        let create = |path: &str, mode, ttl_ms| Op::Create {
            path: path.into(),
            data: None,
            mode,
            ttl_ms,
            acl: vec![Acl::open()],
        };
        assert!(create("/a", CreateMode::Persistent, 0).validate().is_ok());
        assert!(create("/a/", CreateMode::PersistentSequential, 0)
            .validate()
            .is_ok());
        assert!(create("/a/", CreateMode::Persistent, 0).validate().is_err());
        assert!(create("/a", CreateMode::Persistent, 5).validate().is_err());
        assert!(create("/a", CreateMode::PersistentWithTtl, 0)
            .validate()
            .is_err());
        assert!(create("/a", CreateMode::PersistentWithTtl, MAX_TTL_MS + 1)
            .validate()
            .is_err());
        assert!(create("/a", CreateMode::PersistentWithTtl, 5)
            .validate()
            .is_ok());
    }
}
