//! Differential testing of ZooKeeper's client protocol: one sequence of requests, a
//! scripted part ([`scripted`]: null and empty data, null ACL ids, every create mode,
//! versions, multi with a failing op, error codes, reads and watches, the system nodes)
//! and a seeded random part ([`random`]),
//! is sent byte for byte by the zk-api crate's raw client to real ZooKeeper and to zab,
//! and every reply is reduced to what must agree ([`Transcript`]): error codes, paths,
//! data, children (sorted: ZooKeeper lists them in hash order, zab in name order; clients
//! may rely on neither), ACLs and Stats with zxids renamed in order of first appearance,
//! session ids named by connection and timestamps reduced to `0 < ctime <= mtime` (two
//! writes within one millisecond are common on zab and rare on ZooKeeper).
//! `differential::first_difference` names the first step whose replies differ.

use std::collections::HashMap;
use std::time::Duration;

use coordbench_splitmix::SplitMix64;
use coordbench_zk_api::client::{ClientError, RawClient};
use coordbench_zk_api::proto::{
    op, AuthPacket, CreateRequest, PathMode, PathVersion, PathWatch, SetAclRequest, SetDataRequest,
    Stat, WireAcl,
};
use coordbench_zk_api::reply::{MultiResult, ReadResult, ReplyBody};
use coordbench_zk_api::request::{MultiOp, ReadOp, Request};

/// Connections a sequence uses: 0 and 2 add a digest identity first, 1 stays anonymous.
pub const CONNS: usize = 3;
const IO_BOUND: Duration = Duration::from_secs(10);
const SESSION_MS: i32 = 10_000;
/// The identity connection `c` adds (none for connection 1).
fn identity(c: usize) -> Option<&'static str> {
    match c {
        0 => Some("alice:secret"),
        2 => Some("bob:secret"),
        _ => None,
    }
}

/// One request of a sequence, on one connection.
#[derive(Debug, Clone)]
pub struct Step {
    pub conn: usize,
    pub op: i32,
    pub req: Request,
}

/// The normalised replies to a sequence, one line per step.
pub type Transcript = Vec<String>;

/// Sends `steps` to the server at `addr` and returns the normalised replies. A connection
/// the server closes is recorded as such and reopened (a new session) for later steps.
pub async fn run(addr: &str, steps: &[Step]) -> Transcript {
    let mut conns = Vec::with_capacity(CONNS);
    let mut norm = Normaliser::default();
    for c in 0..CONNS {
        conns.push(open(addr, c, &mut norm).await);
    }
    let mut out = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let conn = &mut conns[s.conn];
        let mut line = match conn.call(s.op, &s.req).await {
            Ok((h, _)) if h.err != 0 => format!("err {}", h.err),
            Ok((_, body)) => norm.body(&body),
            Err(e) => {
                *conn = open(addr, s.conn, &mut norm).await;
                format!("connection lost: {}", kind(&e))
            }
        };
        let events: Vec<String> = conn
            .take_events()
            .into_iter()
            .map(|(_, e)| format!("{}:{}", e.kind, e.path))
            .collect();
        if !events.is_empty() {
            line.push_str(&format!(" after events {events:?}"));
        }
        out.push(format!("#{i} c{} {}: {line}", s.conn, describe(s)));
    }
    out
}

/// [`run`], or `None` if the server does not take a session yet (a member starting).
pub async fn try_run(addr: &str, steps: &[Step]) -> Option<Transcript> {
    RawClient::session(addr, SESSION_MS, IO_BOUND).await.ok()?;
    Some(run(addr, steps).await)
}

fn kind(e: &ClientError) -> &'static str {
    match e {
        ClientError::Closed(_) | ClientError::Io { .. } => "closed",
        ClientError::Timeout { .. } => "timeout",
        _ => "bad reply",
    }
}

/// A short name of a step for the transcript (op and path, data and ACL shapes).
fn describe(s: &Step) -> String {
    let detail = match &s.req {
        Request::Create { req, .. } => format!(
            "{} data={} acl={:?} flags={}",
            req.path,
            data_name(req.data.as_deref()),
            req.acl,
            req.flags
        ),
        Request::SetData(r) => format!(
            "{} data={} v={}",
            r.path,
            data_name(r.data.as_deref()),
            r.version
        ),
        Request::SetAcl(r) => format!("{} acl={:?} v={}", r.path, r.acl, r.version),
        Request::Delete(r) | Request::Check(r) => format!("{} v={}", r.path, r.version),
        Request::Exists(r) | Request::GetData(r) => watched(&r.path, r.watch),
        Request::GetChildren { req, .. } => watched(&req.path, req.watch),
        Request::GetAcl(p) => p.clone(),
        Request::Multi(ops) => format!("{} ops", ops.len()),
        Request::AddWatch(r) | Request::RemoveWatches(r) | Request::CheckWatches(r) => {
            format!("{} mode={}", r.path, r.mode)
        }
        _ => String::new(),
    };
    format!("op {} {detail}", s.op)
}

fn watched(path: &str, watch: bool) -> String {
    match watch {
        true => format!("{path} (watch)"),
        false => path.to_string(),
    }
}

fn sorted(v: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = v.iter().collect();
    v.sort();
    v
}

fn data_name(d: Option<&[u8]>) -> String {
    match d {
        None => "null".into(),
        Some(d) => format!("{:?}", String::from_utf8_lossy(d)),
    }
}

/// Opens connection `c`: a new session, and its identity added.
async fn open(addr: &str, c: usize, norm: &mut Normaliser) -> RawClient {
    let (mut client, resp) = RawClient::session(addr, SESSION_MS, IO_BOUND)
        .await
        .unwrap_or_else(|e| panic!("opening connection {c} to {addr}: {e}"));
    norm.sessions.insert(resp.session_id, c);
    if let Some(user) = identity(c) {
        let auth = Request::Auth(AuthPacket {
            kind: 0,
            scheme: "digest".into(),
            auth: user.as_bytes().to_vec(),
        });
        let (h, _) = client
            .call(op::AUTH, &auth)
            .await
            .unwrap_or_else(|e| panic!("addauth on connection {c}: {e}"));
        assert_eq!(h.err, 0, "addauth {user} on {addr}");
    }
    client
}

/// Renames what differs between servers for the same history.
#[derive(Default)]
struct Normaliser {
    zxids: HashMap<i64, usize>,
    sessions: HashMap<i64, usize>,
}

impl Normaliser {
    fn zxid(&mut self, z: i64) -> String {
        if z == 0 {
            return "z-".into();
        }
        let next = self.zxids.len();
        format!("z{}", self.zxids.entry(z).or_insert(next))
    }

    fn stat(&mut self, s: &Stat) -> String {
        let owner = match self.sessions.get(&s.ephemeral_owner) {
            Some(c) => format!("session of c{c}"),
            None => format!("{:#x}", s.ephemeral_owner),
        };
        format!(
            "stat(c={} m={} p={} times:{} v={} cv={} av={} owner={owner} len={} children={})",
            self.zxid(s.czxid),
            self.zxid(s.mzxid),
            self.zxid(s.pzxid),
            0 < s.ctime && s.ctime <= s.mtime,
            s.version,
            s.cversion,
            s.aversion,
            s.data_length,
            s.num_children
        )
    }

    fn body(&mut self, body: &ReplyBody) -> String {
        match body {
            ReplyBody::Empty => "ok".into(),
            ReplyBody::Path(p) => format!("path {p}"),
            ReplyBody::Create2 { path, stat } => format!("path {path} {}", self.stat(stat)),
            ReplyBody::Stat(s) => self.stat(s),
            ReplyBody::Data { data, stat } => {
                format!("data {} {}", data_name(data.as_deref()), self.stat(stat))
            }
            ReplyBody::Strings(v) => format!("{:?}", sorted(v)),
            ReplyBody::Children2 { children, stat } => {
                format!("{:?} {}", sorted(children), self.stat(stat))
            }
            ReplyBody::Acl { acl, stat } => format!("{acl:?} {}", self.stat(stat)),
            ReplyBody::Multi(results) => {
                let parts: Vec<String> = results.iter().map(|r| self.multi_result(r)).collect();
                format!("multi [{}]", parts.join(", "))
            }
            ReplyBody::MultiRead(results) => {
                let parts: Vec<String> = results.iter().map(|r| self.read_result(r)).collect();
                format!("multiRead [{}]", parts.join(", "))
            }
            other => format!("{other:?}"),
        }
    }

    fn read_result(&mut self, r: &ReadResult) -> String {
        match r {
            ReadResult::Data { data, stat } => {
                format!("data {} {}", data_name(data.as_deref()), self.stat(stat))
            }
            ReadResult::Children(c) => format!("{:?}", sorted(c)),
            ReadResult::Error(e) => format!("error {e}"),
        }
    }

    fn multi_result(&mut self, r: &MultiResult) -> String {
        match r {
            MultiResult::Create(p) => format!("create {p}"),
            MultiResult::Create2 { path, stat } => format!("create2 {path} {}", self.stat(stat)),
            MultiResult::SetData(s) => format!("set {}", self.stat(s)),
            MultiResult::Error(e) => format!("error {e}"),
            MultiResult::Delete => "delete".into(),
            MultiResult::Check => "check".into(),
        }
    }
}

// ---- building steps ----

fn acl(perms: i32, scheme: Option<&str>, id: Option<&str>) -> WireAcl {
    WireAcl {
        perms,
        scheme: scheme.map(str::to_string),
        id: id.map(str::to_string),
    }
}

fn open_acl() -> Vec<WireAcl> {
    vec![acl(31, Some("world"), Some("anyone"))]
}

/// ZooKeeper's CREATOR_ALL_ACL as Java clients and kazoo send it: `Id("auth", "")`, or
/// as some other clients do, with a null id.
fn creator_all(null_id: bool) -> Vec<WireAcl> {
    vec![acl(31, Some("auth"), if null_id { None } else { Some("") })]
}

fn create_req(
    path: &str,
    data: Option<&[u8]>,
    acl: Vec<WireAcl>,
    flags: i32,
    ttl: Option<i64>,
) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: data.map(<[u8]>::to_vec),
        acl,
        flags,
        ttl,
    }
}

fn create(conn: usize, code: i32, req: CreateRequest) -> Step {
    Step {
        conn,
        op: code,
        req: Request::Create { op: code, req },
    }
}

fn plain(conn: usize, path: &str, data: Option<&[u8]>, flags: i32) -> Step {
    create(
        conn,
        op::CREATE2,
        create_req(path, data, open_acl(), flags, None),
    )
}

fn set_data(conn: usize, path: &str, data: Option<&[u8]>, version: i32) -> Step {
    let req = SetDataRequest {
        path: path.into(),
        data: data.map(<[u8]>::to_vec),
        version,
    };
    Step {
        conn,
        op: op::SET_DATA,
        req: Request::SetData(req),
    }
}

fn get_data(conn: usize, path: &str) -> Step {
    let req = PathWatch {
        path: path.into(),
        watch: false,
    };
    Step {
        conn,
        op: op::GET_DATA,
        req: Request::GetData(req),
    }
}

fn path_op(conn: usize, code: i32, path: &str) -> Step {
    let pw = PathWatch {
        path: path.into(),
        watch: false,
    };
    let req = match code {
        op::EXISTS => Request::Exists(pw),
        op::GET_ACL => Request::GetAcl(path.into()),
        _ => Request::GetChildren {
            req: pw,
            with_stat: true,
        },
    };
    Step {
        conn,
        op: code,
        req,
    }
}

fn delete(conn: usize, path: &str, version: i32) -> Step {
    let req = PathVersion {
        path: path.into(),
        version,
    };
    Step {
        conn,
        op: op::DELETE,
        req: Request::Delete(req),
    }
}

fn set_acl(conn: usize, path: &str, acl: Vec<WireAcl>, version: i32) -> Step {
    let req = SetAclRequest {
        path: path.into(),
        acl,
        version,
    };
    Step {
        conn,
        op: op::SET_ACL,
        req: Request::SetAcl(req),
    }
}

fn multi(conn: usize, ops: Vec<MultiOp>) -> Step {
    Step {
        conn,
        op: op::MULTI,
        req: Request::Multi(ops),
    }
}

fn multi_create(path: &str, data: Option<&[u8]>, acl: Vec<WireAcl>) -> MultiOp {
    MultiOp::Create {
        op: op::CREATE,
        req: create_req(path, data, acl, 0, None),
    }
}

/// `step` with its watch flag set (getData, exists, getChildren).
fn watching(mut step: Step) -> Step {
    match &mut step.req {
        Request::GetData(r) | Request::Exists(r) => r.watch = true,
        Request::GetChildren { req, .. } => req.watch = true,
        _ => {}
    }
    step
}

fn step(conn: usize, code: i32, req: Request) -> Step {
    Step {
        conn,
        op: code,
        req,
    }
}

/// Reads besides getData (getChildren, getAllChildrenNumber, getEphemerals, multiRead,
/// sync), one-shot watches set by reads and fired by another connection's writes, the
/// system nodes, and op codes ZooKeeper does not serve.
pub fn read_and_watch_steps(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    let mut steps = vec![
        plain(0, root, Some(b"r"), 0),
        plain(0, &p("a"), Some(b"a"), 0),
        plain(1, &p("e"), Some(b"e"), 1),
        watching(get_data(1, &p("a"))),
        watching(path_op(1, op::EXISTS, &p("new"))),
        watching(path_op(1, op::GET_CHILDREN2, root)),
        set_data(0, &p("a"), Some(b"x"), -1),
        plain(0, &p("new"), None, 0),
        delete(0, &p("new"), -1),
        path_op(1, op::EXISTS, "/"),
        step(
            1,
            op::GET_CHILDREN,
            Request::GetChildren {
                req: PathWatch {
                    path: root.into(),
                    watch: false,
                },
                with_stat: false,
            },
        ),
        step(
            1,
            op::GET_ALL_CHILDREN_NUMBER,
            Request::GetAllChildrenNumber(root.into()),
        ),
        step(1, op::GET_EPHEMERALS, Request::GetEphemerals(root.into())),
        step(0, op::GET_EPHEMERALS, Request::GetEphemerals(root.into())),
        step(
            0,
            op::MULTI_READ,
            Request::MultiRead(vec![
                ReadOp::GetData(p("a")),
                ReadOp::GetChildren(root.into()),
                ReadOp::GetData(p("none")),
            ]),
        ),
        step(0, op::SYNC, Request::Sync(root.into())),
        step(
            0,
            op::REMOVE_WATCHES,
            Request::RemoveWatches(PathMode {
                path: p("a"),
                mode: 2,
            }),
        ),
        watching(get_data(0, &p("a"))),
        step(
            0,
            op::REMOVE_WATCHES,
            Request::RemoveWatches(PathMode {
                path: p("a"),
                mode: 2,
            }),
        ),
        set_data(2, &p("a"), Some(b"y"), -1),
        path_op(0, op::EXISTS, "/"),
        get_data(0, "/zookeeper/config"),
        path_op(0, op::GET_CHILDREN2, "/zookeeper"),
        path_op(0, op::GET_ACL, "/"),
        path_op(0, op::GET_ACL, "/zookeeper"),
    ];
    steps.extend(persistent_watch_steps(root));
    steps.push(step(0, 999, Request::Unsupported(999)));
    steps.push(path_op(0, op::EXISTS, root));
    steps
}

/// Persistent watches (addWatch: ZooKeeper answers with an ErrorResponse(0) body, which
/// its Java client reads): a recursive one on `root`, fired by another connection's writes
/// below it, and a plain one on a missing node; checked and removed with watcher type 3
/// (any: 3.8 knows no types 4 and 5, and answers them with a marshalling error), after
/// which the writes fire nothing.
fn persistent_watch_steps(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    let path_mode = |path: &str, mode: i32| PathMode {
        path: path.into(),
        mode,
    };
    vec![
        step(1, op::ADD_WATCH, Request::AddWatch(path_mode(root, 1))),
        step(
            1,
            op::ADD_WATCH,
            Request::AddWatch(path_mode(&p("none"), 0)),
        ),
        plain(0, &p("pw"), None, 0),
        set_data(0, &p("pw"), Some(b"1"), -1),
        path_op(1, op::EXISTS, &p("pw")),
        step(
            1,
            op::CHECK_WATCHES,
            Request::CheckWatches(path_mode(&p("none"), 3)),
        ),
        step(
            1,
            op::REMOVE_WATCHES,
            Request::RemoveWatches(path_mode(root, 3)),
        ),
        step(
            1,
            op::CHECK_WATCHES,
            Request::CheckWatches(path_mode(root, 3)),
        ),
        set_data(0, &p("pw"), Some(b"2"), -1),
        path_op(1, op::EXISTS, &p("pw")),
    ]
}

/// Null and empty data through every write that carries data, read back.
pub fn null_data_steps(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    let mut steps = vec![plain(0, root, Some(b"root"), 0)];
    for (code, name) in [
        (op::CREATE, "create"),
        (op::CREATE2, "create2"),
        (op::CREATE_CONTAINER, "container"),
    ] {
        let flags = if code == op::CREATE_CONTAINER { 4 } else { 0 };
        for (data, tag) in [(None, "null"), (Some(&b""[..]), "empty")] {
            let path = p(&format!("{name}-{tag}"));
            steps.push(create(
                0,
                code,
                create_req(&path, data, open_acl(), flags, None),
            ));
            steps.push(get_data(1, &path));
        }
    }
    let ttl = create_req(&p("ttl-null"), None, open_acl(), 5, Some(600_000));
    steps.push(create(0, op::CREATE_TTL, ttl));
    steps.push(get_data(1, &p("ttl-null")));
    steps.push(set_data(0, &p("create-empty"), None, 0));
    steps.push(get_data(1, &p("create-empty")));
    steps.push(set_data(0, &p("create-empty"), Some(b""), 1));
    steps.push(get_data(1, &p("create-empty")));
    steps.push(multi(
        0,
        vec![
            multi_create(&p("multi-null"), None, open_acl()),
            MultiOp::SetData(SetDataRequest {
                path: p("create-null"),
                data: None,
                version: 0,
            }),
        ],
    ));
    steps.push(get_data(1, &p("multi-null")));
    steps.push(get_data(1, &p("create-null")));
    steps
}

/// ACLs with null strings and the creator's ids, through every write that carries an ACL,
/// on an authenticated and an anonymous connection.
pub fn null_acl_steps(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    let mut steps = vec![plain(0, root, None, 0)];
    for (conn, who) in [(0, "alice"), (1, "anon")] {
        for null_id in [true, false] {
            let tag = format!("{who}-{}", if null_id { "null" } else { "empty" });
            let path = p(&format!("creator-{tag}"));
            steps.push(create(
                conn,
                op::CREATE,
                create_req(&path, Some(b"x"), creator_all(null_id), 0, None),
            ));
            steps.push(path_op(conn, op::GET_ACL, &path));
            steps.push(get_data(2, &path));
            let c2 = p(&format!("c2-{tag}"));
            steps.push(create(
                conn,
                op::CREATE2,
                create_req(&c2, None, creator_all(null_id), 0, None),
            ));
            let container = p(&format!("container-{tag}"));
            steps.push(create(
                conn,
                op::CREATE_CONTAINER,
                create_req(&container, None, creator_all(null_id), 4, None),
            ));
            let ttl = p(&format!("ttl-{tag}"));
            steps.push(create(
                conn,
                op::CREATE_TTL,
                create_req(&ttl, None, creator_all(null_id), 5, Some(600_000)),
            ));
            steps.push(multi(
                conn,
                vec![multi_create(
                    &p(&format!("multi-{tag}")),
                    None,
                    creator_all(null_id),
                )],
            ));
            steps.push(plain(conn, &p(&format!("open-{tag}")), None, 0));
            steps.push(set_acl(
                conn,
                &p(&format!("open-{tag}")),
                creator_all(null_id),
                -1,
            ));
            steps.push(path_op(1, op::GET_ACL, &p(&format!("open-{tag}"))));
        }
    }
    let odd: Vec<Vec<WireAcl>> = vec![
        vec![acl(31, None, Some("anyone"))],
        vec![acl(31, None, None)],
        vec![acl(31, Some("world"), None)],
        vec![acl(31, Some("digest"), None)],
        vec![acl(31, Some("ip"), None)],
        vec![acl(31, Some("sasl"), None)],
        vec![acl(31, Some("auth"), None), acl(31, Some("auth"), None)],
        vec![
            acl(31, Some("auth"), None),
            acl(1, Some("world"), Some("anyone")),
        ],
        vec![
            acl(31, Some("nope"), Some("x")),
            acl(1, Some("world"), None),
        ],
        vec![],
        vec![acl(64, Some("world"), Some("anyone"))],
    ];
    // An op that fails before the one ZooKeeper's check would throw on: the multi aborts
    // there and the throwing op is never looked at; after one that succeeds, it throws.
    for (i, first) in [p("missing/x"), p("fine")].into_iter().enumerate() {
        let ops = vec![
            multi_create(&first, None, open_acl()),
            multi_create(
                &p(&format!("after-{i}")),
                None,
                vec![acl(31, Some("world"), None)],
            ),
        ];
        steps.push(multi(0, ops));
        steps.push(path_op(1, op::EXISTS, &first));
    }
    for (i, a) in odd.into_iter().enumerate() {
        steps.push(create(
            0,
            op::CREATE,
            create_req(&p(&format!("odd-{i}")), None, a.clone(), 0, None),
        ));
        steps.push(set_acl(0, &p("open-alice-null"), a.clone(), -1));
        steps.push(multi(
            0,
            vec![multi_create(&p(&format!("odd-multi-{i}")), None, a)],
        ));
    }
    steps
}

/// Create modes, versions, delete, exists, getChildren2, multi with a failing op and the
/// error codes around them.
pub fn api_steps(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    // First, on a fresh server: a sequential child of "/" (numbered by its cversion).
    let mut steps = vec![
        plain(0, &format!("{root}-seq-"), None, 2),
        plain(0, root, Some(b"r"), 0),
    ];
    for flags in 0..8 {
        steps.push(plain(0, &p(&format!("mode-{flags}-")), Some(b"m"), flags));
    }
    steps.push(create(
        0,
        op::CREATE,
        create_req(&p("ttl-in-create"), None, open_acl(), 5, None),
    ));
    steps.push(create(
        0,
        op::CREATE_TTL,
        create_req(&p("ttl-0"), None, open_acl(), 5, Some(0)),
    ));
    steps.push(create(
        0,
        op::CREATE_TTL,
        create_req(&p("ttl-plain"), None, open_acl(), 0, Some(5)),
    ));
    steps.push(path_op(1, op::GET_CHILDREN2, root));
    steps.extend([
        plain(0, &p("mode-1-/child"), None, 0),
        plain(0, &p("a"), Some(b"1"), 0),
        plain(0, &p("a"), Some(b"1"), 0),
        plain(0, &p("missing/child"), None, 0),
        plain(0, "relative", None, 0),
        plain(0, &p("a/"), None, 0),
        set_data(0, &p("a"), Some(b"2"), 5),
        set_data(0, &p("a"), Some(b"2"), 0),
        set_data(0, &p("a"), Some(b"3"), -1),
        set_data(0, &p("none"), Some(b"3"), -1),
        path_op(1, op::EXISTS, &p("a")),
        path_op(1, op::EXISTS, &p("none")),
        plain(0, &p("a/b"), None, 0),
        delete(0, &p("a"), -1),
        delete(0, &p("a/b"), 3),
        delete(0, &p("a/b"), 0),
        delete(0, &p("a/b"), -1),
        path_op(1, op::GET_CHILDREN2, &p("a")),
        delete(0, "/", -1),
        delete(0, "/zookeeper", -1),
    ]);
    let failing = vec![
        multi_create(&p("m1"), Some(b"x"), open_acl()),
        MultiOp::SetData(SetDataRequest {
            path: p("a"),
            data: Some(b"y".to_vec()),
            version: 42,
        }),
        MultiOp::Delete(PathVersion {
            path: p("a"),
            version: -1,
        }),
    ];
    steps.push(multi(0, failing));
    steps.push(path_op(1, op::EXISTS, &p("m1")));
    let passing = vec![
        multi_create(&p("m1"), Some(b"x"), open_acl()),
        MultiOp::Create {
            op: op::CREATE2,
            req: create_req(&p("m1/s-"), None, open_acl(), 2, None),
        },
        MultiOp::Check(PathVersion {
            path: p("a"),
            version: 2,
        }),
        MultiOp::SetData(SetDataRequest {
            path: p("m1"),
            data: Some(b"z".to_vec()),
            version: 0,
        }),
    ];
    steps.push(multi(0, passing));
    steps.push(path_op(1, op::GET_CHILDREN2, &p("m1")));
    steps.extend(multi_create_shapes(root));
    steps.push(multi(0, vec![]));
    steps
}

/// A create of every op code and some modes inside a multi and alone: what each answers.
fn multi_create_shapes(root: &str) -> Vec<Step> {
    let p = |s: &str| format!("{root}/{s}");
    let mut steps = Vec::new();
    for (i, (code, flags, ttl)) in [
        (op::CREATE2, 0, None),
        (op::CREATE, 4, None),
        (op::CREATE_CONTAINER, 4, None),
        (op::CREATE_CONTAINER, 0, None),
        (op::CREATE_TTL, 5, Some(600_000)),
        (op::CREATE2, 1, None),
        (op::CREATE, 7, None),
        (op::CREATE2, 5, None),
        (op::CREATE_TTL, 0, Some(600_000)),
    ]
    .into_iter()
    .enumerate()
    {
        let req = create_req(&p(&format!("mc-{i}")), None, open_acl(), flags, ttl);
        steps.push(multi(
            0,
            vec![MultiOp::Create {
                op: code,
                req: req.clone(),
            }],
        ));
        let single = CreateRequest {
            path: p(&format!("sc-{i}")),
            ..req
        };
        steps.push(create(0, code, single));
    }
    steps
}

/// `n` seeded random steps over a few paths under `root` (which they create first).
pub fn random(seed: u64, root: &str, n: usize) -> Vec<Step> {
    let mut rng = SplitMix64::new(seed);
    let paths: Vec<String> = ["", "/a", "/b", "/a/c", "/a/c/d"]
        .iter()
        .map(|s| format!("{root}{s}"))
        .collect();
    let mut steps = vec![plain(0, root, None, 0)];
    for _ in 0..n {
        let path = paths[rng.range(1, paths.len() as u32) as usize].clone();
        steps.push(random_step(&mut rng, &path));
    }
    // A last read on every connection shows the notifications still on their way.
    steps.extend((0..CONNS).map(|c| path_op(c, op::EXISTS, "/")));
    steps
}

fn watch_sometimes(rng: &mut SplitMix64, step: Step) -> Step {
    match rng.range(0, 2) {
        0 => watching(step),
        _ => step,
    }
}

fn random_step(rng: &mut SplitMix64, path: &str) -> Step {
    let conn = rng.range(0, CONNS as u32) as usize;
    let version = rng.range(0, 4) as i32 - 1;
    let data: Option<&[u8]> = match rng.range(0, 3) {
        0 => None,
        1 => Some(b""),
        _ => Some(b"d"),
    };
    match rng.range(0, 10) {
        0 | 1 => {
            let flags = [0, 0, 1, 2, 3, 4][rng.range(0, 6) as usize];
            let acl = if rng.range(0, 4) == 0 {
                creator_all(true)
            } else {
                open_acl()
            };
            create(conn, op::CREATE2, create_req(path, data, acl, flags, None))
        }
        2 => set_data(conn, path, data, version),
        3 => delete(conn, path, version),
        4 => watch_sometimes(rng, get_data(conn, path)),
        5 => watch_sometimes(rng, path_op(conn, op::EXISTS, path)),
        6 => watch_sometimes(rng, path_op(conn, op::GET_CHILDREN2, path)),
        7 => path_op(conn, op::GET_ACL, path),
        _ => {
            let ops = vec![
                MultiOp::Check(PathVersion {
                    path: path.to_string(),
                    version,
                }),
                multi_create(&format!("{path}/m"), data, open_acl()),
                MultiOp::Delete(PathVersion {
                    path: format!("{path}/m"),
                    version: -1,
                }),
            ];
            multi(conn, ops)
        }
    }
}

/// The system nodes' stats and ACLs, what they refuse, and children and deletes under
/// `/` and `/zookeeper` (`/x1`, `/x2`, `/zookeeper/x`).
pub fn system_node_steps() -> Vec<Step> {
    vec![
        path_op(0, op::EXISTS, "/"),
        path_op(0, op::EXISTS, "/zookeeper"),
        path_op(0, op::EXISTS, "/zookeeper/quota"),
        path_op(0, op::EXISTS, "/zookeeper/config"),
        path_op(0, op::GET_ACL, "/zookeeper/config"),
        path_op(0, op::GET_ACL, "/zookeeper/quota"),
        path_op(0, op::GET_ACL, "/zookeeper"),
        set_data(0, "/zookeeper/config", Some(b"x"), -1),
        set_data(0, "/zookeeper/quota", Some(b"x"), -1),
        plain(0, "/zookeeper/config/x", None, 0),
        plain(0, "/zookeeper/x", None, 0),
        path_op(0, op::EXISTS, "/zookeeper"),
        delete(0, "/zookeeper/x", -1),
        plain(0, "/x1", None, 0),
        path_op(0, op::EXISTS, "/"),
        plain(0, "/x2", None, 0),
        path_op(0, op::EXISTS, "/"),
        delete(0, "/x1", -1),
        path_op(0, op::EXISTS, "/"),
        plain(0, "/x2/a", None, 0),
        path_op(0, op::EXISTS, "/x2"),
        plain(0, "/x2/b", None, 0),
        path_op(0, op::EXISTS, "/x2"),
    ]
}
