//! Bounded fuzzing of what a ZooKeeper client sends: request frames (header and jute
//! record) and the ConnectRequest. Decoding never panics, and whatever decodes re-encodes
//! to bytes that decode to the same request.

use coordbench_sim::fuzz;
use coordbench_zk_api::jute::{Reader, Writer};
use coordbench_zk_api::proto::{
    op, Acl, AuthPacket, ConnectRequest, CreateRequest, PathMode, PathVersion, PathWatch,
    RequestHeader, SetDataRequest, SetWatches, WireAcl, PERMS_ALL,
};
use coordbench_zk_api::request::{self, MultiOp, ReadOp, Request};

const CASES: u32 = 3_000;

fn encoded(op: i32, req: &Request) -> Vec<u8> {
    let mut w = Writer::new();
    request::encode(RequestHeader { xid: 7, op }, req, &mut w);
    w.buf
}

fn corpus() -> Vec<Vec<u8>> {
    let path = || "/a/b".to_string();
    let pv = PathVersion {
        path: path(),
        version: 3,
    };
    let create = CreateRequest {
        path: path(),
        data: Some(b"data".to_vec()),
        acl: vec![
            Acl {
                perms: PERMS_ALL,
                scheme: "world".into(),
                id: "anyone".into(),
            }
            .into(),
            // Clients' "creator all": Id("auth", null).
            WireAcl {
                perms: PERMS_ALL,
                scheme: Some("auth".into()),
                id: None,
            },
        ],
        flags: 1,
        ttl: None,
    };
    let set = SetDataRequest {
        path: path(),
        data: None,
        version: -1,
    };
    let watches = SetWatches {
        relative_zxid: 9,
        data: vec![path()],
        exist: vec![],
        child: vec![path(), "/c".into()],
        persistent: vec![],
        persistent_recursive: vec![],
    };
    let watch = PathWatch {
        path: path(),
        watch: true,
    };
    let mode = PathMode {
        path: path(),
        mode: 1,
    };
    let requests = [
        (op::PING, Request::Ping),
        (
            op::CREATE2,
            Request::Create {
                op: op::CREATE2,
                req: create.clone(),
            },
        ),
        (op::DELETE, Request::Delete(pv.clone())),
        (op::GET_DATA, Request::GetData(watch.clone())),
        (op::SET_DATA, Request::SetData(set.clone())),
        (
            op::GET_CHILDREN2,
            Request::GetChildren {
                req: watch,
                with_stat: true,
            },
        ),
        (
            op::MULTI,
            Request::Multi(vec![
                MultiOp::Create {
                    op: op::CREATE,
                    req: create,
                },
                MultiOp::Delete(pv.clone()),
                MultiOp::SetData(set),
                MultiOp::Check(pv),
            ]),
        ),
        (
            op::MULTI_READ,
            Request::MultiRead(vec![ReadOp::GetData(path()), ReadOp::GetChildren(path())]),
        ),
        (op::SET_WATCHES2, Request::SetWatches(watches)),
        (op::ADD_WATCH, Request::AddWatch(mode)),
        (
            op::AUTH,
            Request::Auth(AuthPacket {
                kind: 0,
                scheme: "digest".into(),
                auth: b"user:pw".to_vec(),
            }),
        ),
        (op::SYNC, Request::Sync(path())),
    ];
    requests.iter().map(|(op, r)| encoded(*op, r)).collect()
}

#[test]
fn request_frames_decode_without_panics_and_round_trip() {
    fuzz::run(
        "zk request",
        CASES,
        0x2b_15,
        fuzz::inputs(corpus()),
        |bytes| {
            let Ok((header, req)) = request::decode(&bytes) else {
                return;
            };
            let again = encoded(header.op, &req);
            let (header2, req2) = request::decode(&again).expect("a re-encoded request decodes");
            assert_eq!((header2.op, &req2), (header.op, &req));
        },
    );
}

#[test]
fn connect_requests_decode_without_panics() {
    let mut w = Writer::new();
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 5,
        timeout_ms: 30_000,
        session_id: 0x1234,
        password: vec![7; 16],
        read_only: Some(false),
    }
    .encode(&mut w);
    fuzz::run(
        "zk connect",
        CASES,
        0xc0_22,
        fuzz::inputs(vec![w.buf]),
        |bytes| {
            let _ = ConnectRequest::decode(&mut Reader::new(&bytes));
        },
    );
}
