//! A client request frame as a typed [`Request`]: the header's op code picks the record
//! that follows. Unknown op codes decode to [`Request::Unsupported`] (answered with
//! UNIMPLEMENTED); malformed records are errors (the connection is closed).

use crate::jute::{DecodeError, Reader, Writer};
use crate::proto::{
    op, AuthPacket, CreateRequest, MultiHeader, PathMode, PathVersion, PathWatch, RequestHeader,
    SetAclRequest, SetDataRequest, SetWatches,
};

/// One op of a multi (write) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiOp {
    /// `op` is CREATE, CREATE2, CREATE_CONTAINER or CREATE_TTL (it picks the result shape).
    Create {
        op: i32,
        req: CreateRequest,
    },
    Delete(PathVersion),
    SetData(SetDataRequest),
    Check(PathVersion),
}

/// One op of a multiRead request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOp {
    GetData(String),
    GetChildren(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Ping,
    CloseSession,
    /// `op` is CREATE, CREATE2, CREATE_CONTAINER or CREATE_TTL.
    Create {
        op: i32,
        req: CreateRequest,
    },
    Delete(PathVersion),
    Exists(PathWatch),
    GetData(PathWatch),
    SetData(SetDataRequest),
    /// GET_CHILDREN, or GET_CHILDREN2 (`with_stat`).
    GetChildren {
        req: PathWatch,
        with_stat: bool,
    },
    GetAcl(String),
    SetAcl(SetAclRequest),
    Sync(String),
    Check(PathVersion),
    Multi(Vec<MultiOp>),
    MultiRead(Vec<ReadOp>),
    SetWatches(SetWatches),
    AddWatch(PathMode),
    RemoveWatches(PathMode),
    CheckWatches(PathMode),
    GetEphemerals(String),
    GetAllChildrenNumber(String),
    Auth(AuthPacket),
    WhoAmI,
    /// An op code this server does not serve (or does not know).
    Unsupported(i32),
}

/// Decodes a request frame's payload (header and record); the whole payload must be used.
pub fn decode(payload: &[u8]) -> Result<(RequestHeader, Request), DecodeError> {
    let mut r = Reader::new(payload);
    let header = RequestHeader::decode(&mut r)?;
    let req = match header.op {
        op::PING => Request::Ping,
        op::CLOSE_SESSION => Request::CloseSession,
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => Request::Create {
            op: header.op,
            req: CreateRequest::decode(&mut r, header.op == op::CREATE_TTL)?,
        },
        op::DELETE => Request::Delete(PathVersion::decode(&mut r)?),
        op::EXISTS => Request::Exists(PathWatch::decode(&mut r)?),
        op::GET_DATA => Request::GetData(PathWatch::decode(&mut r)?),
        op::SET_DATA => Request::SetData(SetDataRequest::decode(&mut r)?),
        op::GET_CHILDREN | op::GET_CHILDREN2 => Request::GetChildren {
            req: PathWatch::decode(&mut r)?,
            with_stat: header.op == op::GET_CHILDREN2,
        },
        op::GET_ACL => Request::GetAcl(r.string()?),
        op::SET_ACL => Request::SetAcl(SetAclRequest::decode(&mut r)?),
        op::SYNC => Request::Sync(r.string()?),
        op::CHECK => Request::Check(PathVersion::decode(&mut r)?),
        op::MULTI => Request::Multi(decode_multi(&mut r)?),
        op::MULTI_READ => Request::MultiRead(decode_multi_read(&mut r)?),
        op::SET_WATCHES | op::SET_WATCHES2 => {
            Request::SetWatches(SetWatches::decode(&mut r, header.op == op::SET_WATCHES2)?)
        }
        op::ADD_WATCH => Request::AddWatch(PathMode::decode(&mut r)?),
        op::REMOVE_WATCHES => Request::RemoveWatches(PathMode::decode(&mut r)?),
        op::CHECK_WATCHES => Request::CheckWatches(PathMode::decode(&mut r)?),
        op::GET_EPHEMERALS => Request::GetEphemerals(r.string()?),
        op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber(r.string()?),
        op::AUTH => Request::Auth(AuthPacket::decode(&mut r)?),
        op::WHO_AM_I => Request::WhoAmI,
        other => return Ok((header, Request::Unsupported(other))),
    };
    r.finish()?;
    Ok((header, req))
}

fn decode_multi(r: &mut Reader) -> Result<Vec<MultiOp>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(ops);
        }
        ops.push(match h.op {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => MultiOp::Create {
                op: h.op,
                req: CreateRequest::decode(r, h.op == op::CREATE_TTL)?,
            },
            op::DELETE => MultiOp::Delete(PathVersion::decode(r)?),
            op::SET_DATA => MultiOp::SetData(SetDataRequest::decode(r)?),
            op::CHECK => MultiOp::Check(PathVersion::decode(r)?),
            other => return Err(DecodeError::BadMultiOp(other)),
        });
    }
}

fn decode_multi_read(r: &mut Reader) -> Result<Vec<ReadOp>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let h = MultiHeader::decode(r)?;
        if h.done {
            return Ok(ops);
        }
        // Both carry a path and an (ignored) watch flag.
        let req = PathWatch::decode(r)?;
        ops.push(match h.op {
            op::GET_DATA => ReadOp::GetData(req.path),
            op::GET_CHILDREN => ReadOp::GetChildren(req.path),
            other => return Err(DecodeError::BadMultiOp(other)),
        });
    }
}

/// Encodes a request frame's payload (what a client sends; for tests and tools).
pub fn encode(header: RequestHeader, req: &Request, w: &mut Writer) {
    header.encode(w);
    match req {
        Request::Ping | Request::CloseSession | Request::WhoAmI | Request::Unsupported(_) => {}
        Request::Create { req, .. } => req.encode(w),
        Request::Delete(r) | Request::Check(r) => r.encode(w),
        Request::Exists(r) | Request::GetData(r) => r.encode(w),
        Request::GetChildren { req, .. } => req.encode(w),
        Request::SetData(r) => r.encode(w),
        Request::SetAcl(r) => r.encode(w),
        Request::GetAcl(p)
        | Request::Sync(p)
        | Request::GetEphemerals(p)
        | Request::GetAllChildrenNumber(p) => {
            w.string(p);
        }
        Request::Multi(ops) => {
            for o in ops {
                match o {
                    MultiOp::Create { op, req } => {
                        multi_header(w, *op);
                        req.encode(w);
                    }
                    MultiOp::Delete(r) => {
                        multi_header(w, op::DELETE);
                        r.encode(w);
                    }
                    MultiOp::SetData(r) => {
                        multi_header(w, op::SET_DATA);
                        r.encode(w);
                    }
                    MultiOp::Check(r) => {
                        multi_header(w, op::CHECK);
                        r.encode(w);
                    }
                }
            }
            MultiHeader::END.encode(w);
        }
        Request::MultiRead(ops) => {
            for o in ops {
                let (code, path) = match o {
                    ReadOp::GetData(p) => (op::GET_DATA, p),
                    ReadOp::GetChildren(p) => (op::GET_CHILDREN, p),
                };
                multi_header(w, code);
                PathWatch {
                    path: path.clone(),
                    watch: false,
                }
                .encode(w);
            }
            MultiHeader::END.encode(w);
        }
        Request::SetWatches(s) => s.encode(w, header.op == op::SET_WATCHES2),
        Request::AddWatch(r) | Request::RemoveWatches(r) | Request::CheckWatches(r) => r.encode(w),
        Request::Auth(a) => a.encode(w),
    }
}

fn multi_header(w: &mut Writer, code: i32) {
    MultiHeader {
        op: code,
        done: false,
        err: -1,
    }
    .encode(w);
}
