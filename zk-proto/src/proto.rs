//! ZooKeeper's client records (zookeeper.jute) with their jute encodings, and the op
//! codes, special xids and watcher states they use.
//!
//! Each record has `encode` (append to a [`Writer`]) and `decode` (read from a
//! [`Reader`]). Clients send requests and servers send responses, but every record is
//! codable both ways, so tests can act as either side.

/// ZooKeeper's `Stat` record (the tree's; [`encode_stat`] / [`decode_stat`] are its jute).
pub use coordbench_tree::Stat;

use crate::jute::{DecodeError, Reader, Writer};

/// `ZooDefs.OpCode`.
pub mod op {
    pub const NOTIFICATION: i32 = 0;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const SASL: i32 = 102;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const SET_WATCHES2: i32 = 105;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const ERROR: i32 = -1;
}

/// xids with fixed meanings.
pub mod xid {
    pub const NOTIFICATION: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
    pub const SET_WATCHES: i32 = -8;
}

/// `Watcher.Event.KeeperState.SyncConnected`, the state of every node event.
pub const STATE_SYNC_CONNECTED: i32 = 3;

/// ZooKeeper's `Perms.ALL`.
pub const PERMS_ALL: i32 = 31;

pub fn encode_stat(w: &mut Writer, s: &Stat) {
    w.i64(s.czxid)
        .i64(s.mzxid)
        .i64(s.ctime)
        .i64(s.mtime)
        .i32(s.version)
        .i32(s.cversion)
        .i32(s.aversion)
        .i64(s.ephemeral_owner)
        .i32(s.data_length)
        .i32(s.num_children)
        .i64(s.pzxid);
}

pub fn decode_stat(r: &mut Reader) -> Result<Stat, DecodeError> {
    Ok(Stat {
        czxid: r.i64()?,
        mzxid: r.i64()?,
        ctime: r.i64()?,
        mtime: r.i64()?,
        version: r.i32()?,
        cversion: r.i32()?,
        aversion: r.i32()?,
        ephemeral_owner: r.i64()?,
        data_length: r.i32()?,
        num_children: r.i32()?,
        pzxid: r.i64()?,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    /// Sent by clients since 3.4; absent from older ones.
    pub read_only: Option<bool>,
}

impl ConnectRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.protocol_version)
            .i64(self.last_zxid_seen)
            .i32(self.timeout_ms)
            .i64(self.session_id)
            .buffer(&self.password);
        if let Some(ro) = self.read_only {
            w.bool(ro);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: r.i32()?,
            last_zxid_seen: r.i64()?,
            timeout_ms: r.i32()?,
            session_id: r.i64()?,
            password: r.buffer()?,
            read_only: if r.remaining() > 0 {
                Some(r.bool()?)
            } else {
                None
            },
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub read_only: bool,
}

impl ConnectResponse {
    /// ZooKeeper's answer to a reconnect with an expired session or a wrong password:
    /// zero timeout and id, and a zeroed password.
    pub fn expired() -> Self {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 0,
            session_id: 0,
            password: vec![0; 16],
            read_only: false,
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.protocol_version)
            .i32(self.timeout_ms)
            .i64(self.session_id)
            .buffer(&self.password)
            .bool(self.read_only);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: r.i32()?,
            timeout_ms: r.i32()?,
            session_id: r.i64()?,
            password: r.buffer()?,
            read_only: if r.remaining() > 0 { r.bool()? } else { false },
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub xid: i32,
    pub op: i32,
}

impl RequestHeader {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.xid).i32(self.op);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(RequestHeader {
            xid: r.i32()?,
            op: r.i32()?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
}

impl ReplyHeader {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.xid).i64(self.zxid).i32(self.err);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplyHeader {
            xid: r.i32()?,
            zxid: r.i64()?,
            err: r.i32()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    pub kind: i32,
    pub state: i32,
    pub path: String,
}

impl WatcherEvent {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.kind).i32(self.state).string(&self.path);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(WatcherEvent {
            kind: r.i32()?,
            state: r.i32()?,
            path: r.string()?,
        })
    }
}

/// An ACL entry (`perms`, `Id { scheme, id }`): the tree's, which keeps and enforces it.
pub use coordbench_tree::Acl;

/// The jute encoding of an [`Acl`].
pub trait AclCodec: Sized {
    fn encode(&self, w: &mut Writer);
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;
}

impl AclCodec for Acl {
    fn encode(&self, w: &mut Writer) {
        w.i32(self.perms).string(&self.scheme).string(&self.id);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Acl {
            perms: r.i32()?,
            scheme: r.string()?,
            id: r.string()?,
        })
    }
}

/// An ACL entry as a client sent it: jute strings may be null (length -1), and clients
/// do send `Id("auth", null)` for "the creator's ids". The server decides what a null
/// means (ZooKeeper's fixupACL: ignored for `auth`, an invalid ACL or an error otherwise);
/// the codec only keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireAcl {
    pub perms: i32,
    pub scheme: Option<String>,
    pub id: Option<String>,
}

impl From<Acl> for WireAcl {
    fn from(a: Acl) -> Self {
        WireAcl {
            perms: a.perms,
            scheme: Some(a.scheme),
            id: Some(a.id),
        }
    }
}

impl WireAcl {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.perms)
            .string_opt(self.scheme.as_deref())
            .string_opt(self.id.as_deref());
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(WireAcl {
            perms: r.i32()?,
            scheme: r.string_opt()?,
            id: r.string_opt()?,
        })
    }
}

/// A list of [`WireAcl`] as a jute vector.
fn encode_acls(w: &mut Writer, acl: &[WireAcl]) {
    w.i32(i32::try_from(acl.len()).unwrap_or(i32::MAX));
    for a in acl {
        a.encode(w);
    }
}

/// CreateRequest, or CreateTTLRequest when `ttl` is set. `data` is `None` when the client
/// sent null (length -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    pub path: String,
    pub data: Option<Vec<u8>>,
    pub acl: Vec<WireAcl>,
    pub flags: i32,
    pub ttl: Option<i64>,
}

impl CreateRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path).buffer_opt(self.data.as_deref());
        encode_acls(w, &self.acl);
        w.i32(self.flags);
        if let Some(ttl) = self.ttl {
            w.i64(ttl);
        }
    }

    pub fn decode(r: &mut Reader, with_ttl: bool) -> Result<Self, DecodeError> {
        Ok(CreateRequest {
            path: r.string()?,
            data: r.data()?,
            acl: r.vector(12, WireAcl::decode)?,
            flags: r.i32()?,
            ttl: if with_ttl { Some(r.i64()?) } else { None },
        })
    }
}

/// SetACLRequest: a path, the new ACL and the expected aversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAclRequest {
    pub path: String,
    pub acl: Vec<WireAcl>,
    pub version: i32,
}

impl SetAclRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path);
        encode_acls(w, &self.acl);
        w.i32(self.version);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SetAclRequest {
            path: r.string()?,
            acl: r.vector(12, WireAcl::decode)?,
            version: r.i32()?,
        })
    }
}

/// A path and a version: DeleteRequest and CheckVersionRequest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathVersion {
    pub path: String,
    pub version: i32,
}

impl PathVersion {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path).i32(self.version);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PathVersion {
            path: r.string()?,
            version: r.i32()?,
        })
    }
}

/// A path and a watch flag: ExistsRequest, GetDataRequest, GetChildren(2)Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathWatch {
    pub path: String,
    pub watch: bool,
}

impl PathWatch {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path).bool(self.watch);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PathWatch {
            path: r.string()?,
            watch: r.bool()?,
        })
    }
}

/// A path and an int: AddWatchRequest (mode), RemoveWatchesRequest and
/// CheckWatchesRequest (watcher type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMode {
    pub path: String,
    pub mode: i32,
}

impl PathMode {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path).i32(self.mode);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PathMode {
            path: r.string()?,
            mode: r.i32()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDataRequest {
    pub path: String,
    /// `None`: null data (length -1).
    pub data: Option<Vec<u8>>,
    pub version: i32,
}

impl SetDataRequest {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.path)
            .buffer_opt(self.data.as_deref())
            .i32(self.version);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SetDataRequest {
            path: r.string()?,
            data: r.data()?,
            version: r.i32()?,
        })
    }
}

/// SetWatches (three lists) or SetWatches2 (five).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetWatches {
    pub relative_zxid: i64,
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
    pub persistent: Vec<String>,
    pub persistent_recursive: Vec<String>,
}

impl SetWatches {
    pub fn encode(&self, w: &mut Writer, v2: bool) {
        w.i64(self.relative_zxid)
            .strings(&self.data)
            .strings(&self.exist)
            .strings(&self.child);
        if v2 {
            w.strings(&self.persistent)
                .strings(&self.persistent_recursive);
        }
    }

    pub fn decode(r: &mut Reader, v2: bool) -> Result<Self, DecodeError> {
        let relative_zxid = r.i64()?;
        let (data, exist, child) = (r.strings()?, r.strings()?, r.strings()?);
        let (persistent, persistent_recursive) = if v2 {
            (r.strings()?, r.strings()?)
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(SetWatches {
            relative_zxid,
            data,
            exist,
            child,
            persistent,
            persistent_recursive,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiHeader {
    pub op: i32,
    pub done: bool,
    pub err: i32,
}

impl MultiHeader {
    /// The header that ends a multi request or response.
    pub const END: MultiHeader = MultiHeader {
        op: -1,
        done: true,
        err: -1,
    };

    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.op).bool(self.done).i32(self.err);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        // Struct fields are evaluated in the order written: op, done, err.
        Ok(MultiHeader {
            op: r.i32()?,
            done: r.bool()?,
            err: r.i32()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPacket {
    pub kind: i32,
    pub scheme: String,
    pub auth: Vec<u8>,
}

impl AuthPacket {
    pub fn encode(&self, w: &mut Writer) {
        w.i32(self.kind).string(&self.scheme).buffer(&self.auth);
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(AuthPacket {
            kind: r.i32()?,
            scheme: r.string()?,
            auth: r.buffer()?,
        })
    }
}
