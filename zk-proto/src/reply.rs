//! What the server sends: reply frames (a [`ReplyHeader`] and, on success, the body the
//! request's op calls for) and watch notification frames (xid -1).

use coordbench_tree::{Stat, WatchEvent};

use crate::jute::{DecodeError, Reader, Writer};
use crate::proto::{
    decode_stat, encode_stat, op, xid, Acl, AclCodec, MultiHeader, ReplyHeader, WatcherEvent,
    STATE_SYNC_CONNECTED,
};

/// One result of a multi (write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// Plain create (CreateResponse).
    Create(String),
    /// create2, container and TTL creates (Create2Response).
    Create2 {
        path: String,
        stat: Stat,
    },
    Delete,
    SetData(Stat),
    Check,
    /// ErrorResponse: 0 for ops before a failed one, the failure's code, then
    /// RUNTIME_INCONSISTENCY for the ops after it (as ZooKeeper reports them).
    Error(i32),
}

/// One result of a multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    /// `data` is `None` for a node created or set with null data.
    Data {
        data: Option<Vec<u8>>,
        stat: Stat,
    },
    Children(Vec<String>),
    Error(i32),
}

/// The record after a successful reply's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyBody {
    Empty,
    /// CreateResponse, SyncResponse.
    Path(String),
    Create2 {
        path: String,
        stat: Stat,
    },
    /// ExistsResponse, SetDataResponse.
    Stat(Stat),
    /// GetDataResponse; `data` is `None` (length -1) for null data.
    Data {
        data: Option<Vec<u8>>,
        stat: Stat,
    },
    /// GetChildrenResponse, GetEphemeralsResponse.
    Strings(Vec<String>),
    Children2 {
        children: Vec<String>,
        stat: Stat,
    },
    Acl {
        acl: Vec<Acl>,
        stat: Stat,
    },
    Multi(Vec<MultiResult>),
    MultiRead(Vec<ReadResult>),
    /// GetAllChildrenNumberResponse; ErrorResponse (addWatch's answer, always 0).
    Int(i32),
    /// WhoAmIResponse: (auth scheme, user) pairs.
    WhoAmI(Vec<(String, String)>),
}

impl ReplyBody {
    pub fn encode(&self, w: &mut Writer) {
        match self {
            ReplyBody::Empty => {}
            ReplyBody::Path(p) => {
                w.string(p);
            }
            ReplyBody::Create2 { path, stat } => {
                w.string(path);
                encode_stat(w, stat);
            }
            ReplyBody::Stat(s) => encode_stat(w, s),
            ReplyBody::Data { data, stat } => {
                w.buffer_opt(data.as_deref());
                encode_stat(w, stat);
            }
            ReplyBody::Strings(v) => {
                w.strings(v);
            }
            ReplyBody::Children2 { children, stat } => {
                w.strings(children);
                encode_stat(w, stat);
            }
            ReplyBody::Acl { acl, stat } => {
                w.i32(count(acl.len()));
                for a in acl {
                    a.encode(w);
                }
                encode_stat(w, stat);
            }
            ReplyBody::Multi(results) => {
                for r in results {
                    encode_multi_result(w, r);
                }
                MultiHeader::END.encode(w);
            }
            ReplyBody::MultiRead(results) => {
                for r in results {
                    match r {
                        ReadResult::Data { data, stat } => {
                            result_header(w, op::GET_DATA, 0);
                            w.buffer_opt(data.as_deref());
                            encode_stat(w, stat);
                        }
                        ReadResult::Children(c) => {
                            result_header(w, op::GET_CHILDREN, 0);
                            w.strings(c);
                        }
                        ReadResult::Error(e) => {
                            result_header(w, op::ERROR, *e);
                            w.i32(*e);
                        }
                    }
                }
                MultiHeader::END.encode(w);
            }
            ReplyBody::Int(n) => {
                w.i32(*n);
            }
            ReplyBody::WhoAmI(infos) => {
                w.i32(count(infos.len()));
                for (scheme, user) in infos {
                    w.string(scheme).string(user);
                }
            }
        }
    }

    /// Reads the body of a successful reply to a request with op code `op` (what a client
    /// does; for tests and tools).
    pub fn decode(request_op: i32, r: &mut Reader) -> Result<ReplyBody, DecodeError> {
        let body = match request_op {
            op::CREATE | op::SYNC => ReplyBody::Path(r.string()?),
            op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => ReplyBody::Create2 {
                path: r.string()?,
                stat: decode_stat(r)?,
            },
            op::EXISTS | op::SET_DATA => ReplyBody::Stat(decode_stat(r)?),
            op::GET_DATA => ReplyBody::Data {
                data: r.data()?,
                stat: decode_stat(r)?,
            },
            op::GET_CHILDREN | op::GET_EPHEMERALS => ReplyBody::Strings(r.strings()?),
            op::GET_CHILDREN2 => ReplyBody::Children2 {
                children: r.strings()?,
                stat: decode_stat(r)?,
            },
            op::GET_ACL => ReplyBody::Acl {
                acl: r.vector(12, Acl::decode)?,
                stat: decode_stat(r)?,
            },
            op::MULTI => ReplyBody::Multi(decode_multi(r)?),
            op::MULTI_READ => ReplyBody::MultiRead(decode_multi_read(r)?),
            op::GET_ALL_CHILDREN_NUMBER | op::ADD_WATCH => ReplyBody::Int(r.i32()?),
            op::WHO_AM_I => ReplyBody::WhoAmI(r.vector(8, |r| Ok((r.string()?, r.string()?)))?),
            _ => ReplyBody::Empty,
        };
        r.finish()?;
        Ok(body)
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn result_header(w: &mut Writer, code: i32, err: i32) {
    MultiHeader {
        op: code,
        done: false,
        err,
    }
    .encode(w);
}

fn encode_multi_result(w: &mut Writer, r: &MultiResult) {
    match r {
        MultiResult::Create(path) => {
            result_header(w, op::CREATE, 0);
            w.string(path);
        }
        MultiResult::Create2 { path, stat } => {
            result_header(w, op::CREATE2, 0);
            w.string(path);
            encode_stat(w, stat);
        }
        MultiResult::Delete => result_header(w, op::DELETE, 0),
        MultiResult::SetData(stat) => {
            result_header(w, op::SET_DATA, 0);
            encode_stat(w, stat);
        }
        MultiResult::Check => result_header(w, op::CHECK, 0),
        MultiResult::Error(e) => {
            result_header(w, op::ERROR, *e);
            w.i32(*e);
        }
    }
}

fn decode_multi(r: &mut Reader) -> Result<Vec<MultiResult>, DecodeError> {
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(out);
        }
        out.push(match h.op {
            op::CREATE => MultiResult::Create(r.string()?),
            op::CREATE2 => MultiResult::Create2 {
                path: r.string()?,
                stat: decode_stat(r)?,
            },
            op::DELETE => MultiResult::Delete,
            op::SET_DATA => MultiResult::SetData(decode_stat(r)?),
            op::CHECK => MultiResult::Check,
            op::ERROR => MultiResult::Error(r.i32()?),
            other => return Err(DecodeError::BadMultiOp(other)),
        });
    }
}

fn decode_multi_read(r: &mut Reader) -> Result<Vec<ReadResult>, DecodeError> {
    let mut out = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(out);
        }
        out.push(match h.op {
            op::GET_DATA => ReadResult::Data {
                data: r.data()?,
                stat: decode_stat(r)?,
            },
            op::GET_CHILDREN => ReadResult::Children(r.strings()?),
            op::ERROR => ReadResult::Error(r.i32()?),
            other => return Err(DecodeError::BadMultiOp(other)),
        });
    }
}

/// A whole reply frame. ZooKeeper sends no body with an error.
pub fn reply_frame(xid: i32, zxid: i64, err: i32, body: &ReplyBody) -> Vec<u8> {
    let mut w = Writer::frame();
    ReplyHeader { xid, zxid, err }.encode(&mut w);
    if err == 0 {
        body.encode(&mut w);
    }
    w.into_frame()
}

/// A whole watch notification frame.
pub fn notification_frame(event: &WatchEvent) -> Vec<u8> {
    let mut w = Writer::frame();
    ReplyHeader {
        xid: xid::NOTIFICATION,
        zxid: event.zxid,
        err: 0,
    }
    .encode(&mut w);
    WatcherEvent {
        kind: event.kind.code(),
        state: STATE_SYNC_CONNECTED,
        path: event.path.clone(),
    }
    .encode(&mut w);
    w.into_frame()
}
