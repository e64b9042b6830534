//! What the leader proposes ([`Command`]), what applying it returns
//! ([`Applied`]), and the binary codec for both.
//!
//! Commands travel through the Raft log as opaque bytes: [`Command::encode`]
//! / [`Command::decode`] use postcard (compact varints, no schema in the
//! bytes). Every input a command needs, time included, is inside it, so
//! applying it is a pure function of (state, command).

use serde::{Deserialize, Serialize};

use crate::auth::{AuthCommand, AuthInfo};
use crate::error::{CodecError, KvError};
use crate::txn;
use crate::types::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, Event,
    LeaseCheckpoint, LeaseExpireResponse, LeaseGrantResponse, LeaseKeepAliveResponse,
    LeaseRevokeResponse, PutRequest, PutResponse, ResponseHeader, TxnRequest, TxnResponse,
};

/// A replicated write (or a linearizable txn) proposed by the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
    Compact(CompactionRequest),
    /// Grants lease `id` (0: the state machine picks a free id from the log
    /// index) with `ttl` seconds. `now_ms` is the proposer's clock, kept for the log:
    /// the leader starts the lease's deadline on its own clock when it applies the grant.
    LeaseGrant {
        id: i64,
        ttl: i64,
        now_ms: u64,
    },
    /// Revokes a lease, deleting its keys at one revision.
    LeaseRevoke {
        id: i64,
    },
    /// A keep-alive through the log, as older builds proposed one (keep-alives are
    /// answered by the leader now, see [`crate::lease_clock`]). Still applied, as a
    /// renewal does: it clears the lease's checkpointed remaining TTL.
    LeaseRenew {
        id: i64,
        now_ms: u64,
    },
    /// Older builds' promotion of a new leader. Promotion is each leader's own now
    /// ([`crate::lease_clock::LeaseClock`]); applying this changes nothing.
    LeaseRenewAll {
        now_ms: u64,
    },
    /// Revokes each listed lease that still exists (the leader found their deadlines
    /// passed at `now_ms` on its clock); leases already gone are skipped.
    LeaseExpire {
        ids: Vec<i64>,
        now_ms: u64,
    },
    /// A change of the auth state, or an authentication.
    Auth(AuthCommand),
    /// `command` sent by an authenticated user: apply checks its permissions while auth
    /// is enabled (a command without a user is refused then, unless it needs none:
    /// lease grants, renewals, checkpoints and expiry, compaction). Not nested.
    As {
        caller: AuthInfo,
        command: Box<Command>,
    },
    /// The leader's checkpoint of remaining TTLs (etcd's `LeaseCheckpoint`): each lease
    /// listed that exists gets its [`crate::Lease::remaining_ms`] (0 clears it, as a
    /// renewal must before it is answered). A new leader resumes from these.
    LeaseCheckpoint {
        checkpoints: Vec<LeaseCheckpoint>,
    },
}

impl Command {
    /// The bytes to put in a log entry.
    pub fn encode(&self) -> Vec<u8> {
        // Sized exactly first: the buffer becomes a log entry the Raft log keeps until the
        // next snapshot (100,000 entries), and a Vec grown by doubling ends up to twice
        // the command's size (a put of a 256-byte value: 540 bytes for 274).
        // Serialising these types cannot fail: every sequence has a known length and the
        // buffer grows.
        let size = postcard::experimental::serialized_size(self)
            .expect("postcard sizing of Command is infallible");
        postcard::to_extend(self, Vec::with_capacity(size))
            .expect("postcard serialisation of Command is infallible")
    }

    /// Reads a log entry written by [`Command::encode`]; trailing bytes are an error.
    pub fn decode(bytes: &[u8]) -> Result<Command, CodecError> {
        match postcard::take_from_bytes::<Command>(bytes) {
            Ok((cmd, [])) => Ok(cmd),
            Ok((_, rest)) => Err(CodecError::Decode(format!("{} trailing bytes", rest.len()))),
            Err(e) => Err(CodecError::Decode(e.to_string())),
        }
    }

    /// The checks etcd makes before proposing; a leader runtime calls this
    /// to reject bad requests without using the log. Apply repeats them.
    pub fn validate(&self) -> Result<(), KvError> {
        match self {
            Command::Put(p) => txn::validate_put(p),
            Command::DeleteRange(d) => txn::validate_delete(d),
            Command::Txn(t) => txn::validate_txn(t),
            Command::As { command, .. } => match **command {
                Command::As { .. } => Err(KvError::NestedCaller),
                ref inner => inner.validate(),
            },
            _ => Ok(()),
        }
    }
}

/// The successful answer to a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compact(CompactionResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    LeaseRenew(LeaseKeepAliveResponse),
    LeaseRenewAll(ResponseHeader),
    LeaseExpire(LeaseExpireResponse),
    /// An auth command's answer: the token of an authentication, else empty.
    Auth {
        header: ResponseHeader,
        token: String,
    },
    LeaseCheckpoint(ResponseHeader),
}

impl Response {
    /// The top-level header, for the runtime to fill cluster, member and term.
    pub fn header_mut(&mut self) -> &mut ResponseHeader {
        match self {
            Response::Put(r) => &mut r.header,
            Response::DeleteRange(r) => &mut r.header,
            Response::Txn(r) => &mut r.header,
            Response::Compact(r) => &mut r.header,
            Response::LeaseGrant(r) => &mut r.header,
            Response::LeaseRevoke(r) => &mut r.header,
            Response::LeaseRenew(r) => &mut r.header,
            Response::LeaseRenewAll(h) => h,
            Response::LeaseExpire(r) => &mut r.header,
            Response::Auth { header, .. } => header,
            Response::LeaseCheckpoint(h) => h,
        }
    }
}

/// Outcome of applying one log entry, identical on every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The answer for the client that proposed the command (if it waits here).
    pub result: Result<Response, KvError>,
    /// Watch events of the writes made, in revision then sub-revision order
    /// (empty if nothing was written). Feed them to a [`crate::WatchHub`].
    pub events: Vec<Event>,
    /// Store revision after the command.
    pub revision: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Compare, CompareResult, CompareTarget, RequestOp};

    #[test]
    fn codec_round_trip() {
        let cmds = vec![
            Command::Put(PutRequest {
                key: b"k".to_vec(),
                value: vec![0; 300],
                lease: -5,
                prev_kv: true,
                ..Default::default()
            }),
            Command::Txn(TxnRequest {
                compare: vec![Compare {
                    result: CompareResult::Less,
                    target: CompareTarget::Value(b"x".to_vec()),
                    key: b"a".to_vec(),
                    range_end: vec![0],
                }],
                success: vec![RequestOp::Txn(TxnRequest::default())],
                failure: vec![RequestOp::DeleteRange(DeleteRangeRequest::default())],
            }),
            Command::LeaseExpire {
                ids: vec![1, i64::MAX, i64::MIN],
                now_ms: u64::MAX,
            },
            Command::LeaseRenewAll { now_ms: 0 },
            Command::LeaseCheckpoint {
                checkpoints: vec![
                    LeaseCheckpoint {
                        id: 3,
                        remaining_ms: 1_500,
                    },
                    LeaseCheckpoint {
                        id: -1,
                        remaining_ms: 0,
                    },
                ],
            },
        ];
        for cmd in cmds {
            let bytes = cmd.encode();
            assert_eq!(
                bytes.capacity(),
                bytes.len(),
                "a log entry holds no slack: {cmd:?}"
            );
            assert_eq!(Command::decode(&bytes), Ok(cmd));
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Command::decode(&longer).is_err());
            assert!(Command::decode(&bytes[..bytes.len() - 1]).is_err());
        }
        let small = Command::Put(PutRequest {
            key: b"key".to_vec(),
            value: b"value".to_vec(),
            ..Default::default()
        });
        assert!(small.encode().len() <= 16, "compact encoding");
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
}
