//! The protocol at the byte level, with a raw client made of this crate's codec: the
//! four-letter words, malformed and oversized frames, refused handshakes, the order of
//! notifications and replies, SetWatches on reconnect, and a member without a leader.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{four_letter, TestServer};
use coordbench_zk_api::client::{ClientError, Frame, RawClient};
use coordbench_zk_api::jute::{Reader, Writer};
use coordbench_zk_api::proto::{
    op, xid, ConnectRequest, ConnectResponse, PathMode, PathVersion, PathWatch, ReplyHeader,
    RequestHeader, SetDataRequest, SetWatches,
};
use coordbench_zk_api::reply::ReplyBody;
use coordbench_zk_api::request::{self, Request};

/// How long a read waits for a frame or a close.
const IO_BOUND: Duration = Duration::from_secs(5);

/// The crate's raw client (`coordbench_zk_api::client`), panicking on what these tests
/// do not expect.
struct Raw {
    c: RawClient,
}

impl Raw {
    async fn open(addr: SocketAddr) -> Raw {
        let c = RawClient::open(&addr.to_string(), IO_BOUND)
            .await
            .expect("connect");
        Raw { c }
    }

    async fn send_frame(&mut self, payload: &[u8]) {
        self.c.send_frame(payload).await.expect("write");
    }

    /// Sends a ConnectRequest; the response, or `None` if the server closed instead.
    async fn handshake(
        &mut self,
        session_id: i64,
        password: &[u8],
        last_zxid_seen: i64,
        timeout_ms: i32,
    ) -> Option<ConnectResponse> {
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen,
            timeout_ms,
            session_id,
            password: password.to_vec(),
            read_only: Some(false),
        };
        match self.c.handshake(&req).await {
            Ok(resp) => Some(resp),
            Err(ClientError::Closed(_)) => None,
            Err(e) => panic!("handshake: {e}"),
        }
    }

    async fn session(addr: SocketAddr) -> (Raw, ConnectResponse) {
        let mut raw = Raw::open(addr).await;
        let resp = raw.handshake(0, &[0; 16], 0, 2000).await.expect("session");
        assert!(resp.session_id != 0);
        (raw, resp)
    }

    async fn send(&mut self, code: i32, req: &Request) -> i32 {
        self.c.send(code, req).await.expect("send")
    }

    async fn frame(&mut self) -> Frame {
        self.c.frame().await.expect("a frame")
    }

    /// Sends a request and returns its reply (no notifications expected in between).
    async fn call(&mut self, code: i32, req: &Request) -> (ReplyHeader, ReplyBody) {
        let x = self.send(code, req).await;
        match self.frame().await {
            Frame::Reply(h, body) => {
                assert_eq!(h.xid, x);
                let body = if h.err == 0 {
                    ReplyBody::decode(code, &mut Reader::new(&body)).expect("body")
                } else {
                    ReplyBody::Empty
                };
                (h, body)
            }
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// True once the server has closed the connection (bounded wait).
    async fn closed(&mut self) -> bool {
        self.c.closed().await
    }
}

fn create(path: &str) -> Request {
    Request::Create {
        op: op::CREATE,
        req: coordbench_zk_api::proto::CreateRequest {
            path: path.into(),
            data: Some(b"v".to_vec()),
            acl: vec![coordbench_zk_api::proto::Acl::open().into()],
            flags: 0,
            ttl: None,
        },
    }
}

fn set_data(path: &str) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(b"new".to_vec()),
        version: -1,
    })
}

fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData(PathWatch {
        path: path.into(),
        watch,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_letter_words() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut raw, _) = Raw::session(server.addr()).await;
    raw.call(op::CREATE, &create("/n")).await;
    assert_eq!(four_letter(server.addr(), "ruok").await, "imok");
    assert_eq!(four_letter(server.addr(), "isro").await, "rw");
    let srvr = four_letter(server.addr(), "srvr").await;
    for prefix in [
        "Zookeeper version: 3.8.0-coordbench, built on",
        "Latency min/avg/max: ",
        "Received: ",
        "Sent: ",
        "Connections: 1",
        "Outstanding: 0",
        "Zxid: 0x",
        "Mode: standalone",
        "Node count: 5",
    ] {
        assert!(
            srvr.lines().any(|l| l.starts_with(prefix)),
            "{prefix:?} in {srvr}"
        );
    }
    let stat = four_letter(server.addr(), "stat").await;
    assert!(
        stat.contains("Clients:") && stat.contains("Mode: standalone"),
        "{stat}"
    );
    let mntr = four_letter(server.addr(), "mntr").await;
    for key in [
        "zk_version",
        "zk_server_state\tstandalone",
        "zk_avg_latency",
        "zk_packets_received",
        "zk_packets_sent",
        "zk_num_alive_connections\t1",
        "zk_outstanding_requests\t0",
        "zk_znode_count\t5",
        "zk_watch_count\t0",
    ] {
        assert!(
            mntr.lines().any(|l| l.starts_with(key)),
            "{key:?} in {mntr}"
        );
    }
    let conf = four_letter(server.addr(), "conf").await;
    assert!(
        conf.contains("tickTime=100") && conf.contains("maxSessionTimeout=2000"),
        "{conf}"
    );
    assert!(four_letter(server.addr(), "wchs")
        .await
        .contains("Total watches:0"));
    assert_eq!(
        four_letter(server.addr(), "srst").await,
        "Server stats reset.\n"
    );
    assert_eq!(
        four_letter(server.addr(), "zzzz").await,
        "",
        "unknown words get nothing"
    );
    server.stop().await;
}

/// addWatch is answered as ZooKeeper answers it, with an ErrorResponse(0) body after the
/// header: ZooKeeper's Java client reads those four bytes (Curator's CuratorCache and
/// PersistentWatcher add such watches), and drops the connection without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_watch_is_answered_with_an_error_response() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut raw, _) = Raw::session(server.addr()).await;
    for mode in [0, 1] {
        let req = Request::AddWatch(PathMode {
            path: "/".into(),
            mode,
        });
        let (h, body) = raw.c.call_raw(op::ADD_WATCH, &req).await.expect("reply");
        assert_eq!(h.err, 0, "mode {mode}");
        assert_eq!(body, 0i32.to_be_bytes(), "mode {mode}: ErrorResponse(0)");
    }
    // Both are set and fire before the reply to the write below them, in ZooKeeper's
    // order: the recursive one (NodeCreated of the child), then the plain one
    // (NodeChildrenChanged of "/").
    let (h, _) = raw.c.call(op::CREATE, &create("/pw")).await.expect("reply");
    assert_eq!(h.err, 0);
    let events: Vec<(i32, String)> = raw
        .c
        .take_events()
        .into_iter()
        .map(|(_, e)| (e.kind, e.path))
        .collect();
    assert_eq!(events, [(1, "/pw".to_string()), (4, "/".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_close_only_their_connection() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut good, _) = Raw::session(server.addr()).await;

    // Oversized: a 2 MiB length prefix.
    let mut big = Raw::open(server.addr()).await;
    big.c.write_raw(&(2i32 << 20).to_be_bytes()).await.unwrap();
    assert!(big.closed().await);
    // A negative length after the handshake.
    let (mut neg, _) = Raw::session(server.addr()).await;
    neg.c.write_raw(&(-5i32).to_be_bytes()).await.unwrap();
    assert!(neg.closed().await);
    // A ConnectRequest too short to be one.
    let mut short = Raw::open(server.addr()).await;
    short.send_frame(&[0, 0, 0, 0, 1]).await;
    assert!(short.closed().await);
    // A request whose record is cut short, and one with trailing garbage.
    for payload in [
        vec![0, 0, 0, 5, 0, 0, 0, op::GET_DATA as u8, 0, 0, 0, 9, b'/'],
        {
            let mut w = Writer::new();
            request::encode(
                RequestHeader {
                    xid: 3,
                    op: op::EXISTS,
                },
                &Request::Exists(PathWatch {
                    path: "/".into(),
                    watch: false,
                }),
                &mut w,
            );
            w.buf.extend_from_slice(b"junk");
            w.buf
        },
    ] {
        let (mut bad, _) = Raw::session(server.addr()).await;
        bad.send_frame(&payload).await;
        assert!(bad.closed().await);
    }
    // A known op code this server does not serve is refused and the connection stays; one
    // ZooKeeper does not know is answered UNIMPLEMENTED and the connection closed, as
    // ZooKeeper does (tests/zk_differential.rs compares both with ZooKeeper 3.8).
    let (h, _) = good
        .call(op::RECONFIG, &Request::Unsupported(op::RECONFIG))
        .await;
    assert_eq!(h.err, -123, "RECONFIG_DISABLED");
    let (h, _) = good.call(op::CREATE, &create("/still-fine")).await;
    assert_eq!(h.err, 0);
    let x = good.send(op::PING, &Request::Ping).await;
    assert!(matches!(good.frame().await, Frame::Reply(h, _) if h.xid == x && h.xid == -2));
    let (h, _) = good.call(4242, &Request::Unsupported(4242)).await;
    assert_eq!(h.err, -6, "UNIMPLEMENTED");
    assert!(good.closed().await);
    assert_eq!(four_letter(server.addr(), "ruok").await, "imok");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_handshakes() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut live, resp) = Raw::session(server.addr()).await;
    assert_eq!(resp.timeout_ms, 2000, "negotiated within 2..=20 ticks");
    assert_eq!(resp.password.len(), 16);
    // A wrong password: the expired answer, then a close.
    let mut thief = Raw::open(server.addr()).await;
    let answer = thief
        .handshake(resp.session_id, &[7; 16], 0, 2000)
        .await
        .expect("answer");
    assert_eq!((answer.session_id, answer.timeout_ms), (0, 0));
    assert!(thief.closed().await);
    // An unknown session: the same.
    let mut ghost = Raw::open(server.addr()).await;
    let answer = ghost
        .handshake(0x7777, &[0; 16], 0, 2000)
        .await
        .expect("answer");
    assert_eq!(answer.session_id, 0);
    // A client that has seen more than this member applied: closed without an answer.
    let mut future = Raw::open(server.addr()).await;
    assert!(future.handshake(0, &[0; 16], 1 << 40, 2000).await.is_none());
    // The right password from a new connection takes the session over; the old
    // connection is closed (the session moved).
    let mut again = Raw::open(server.addr()).await;
    let answer = again
        .handshake(resp.session_id, &resp.password, 0, 2000)
        .await
        .expect("answer");
    assert_eq!(answer.session_id, resp.session_id);
    assert!(live.closed().await);
    let (h, _) = again.call(op::CREATE, &create("/moved")).await;
    assert_eq!(h.err, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_precede_the_reply_that_caused_them() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut raw, _) = Raw::session(server.addr()).await;
    raw.call(op::CREATE, &create("/o")).await;
    four_letter(server.addr(), "srst").await;
    let (_, body) = raw.call(op::GET_DATA, &get_data("/o", true)).await;
    assert!(matches!(body, ReplyBody::Data { ref data, .. } if data.as_deref() == Some(b"v")));
    let x = raw.send(op::SET_DATA, &set_data("/o")).await;
    let Frame::Event(event_zxid, event) = raw.frame().await else {
        panic!("event first")
    };
    assert_eq!((event.kind, event.state, event.path.as_str()), (3, 3, "/o"));
    let Frame::Reply(h, _) = raw.frame().await else {
        panic!("then the reply")
    };
    assert_eq!((h.xid, h.err, h.zxid), (x, 0, event_zxid));
    // Two requests in, two replies and a notification out.
    let mntr = four_letter(server.addr(), "mntr").await;
    assert!(mntr.contains("zk_packets_received\t2\n"), "{mntr}");
    assert!(mntr.contains("zk_packets_sent\t3\n"), "{mntr}");
    // One-shot: a second change is silent.
    let (h, _) = raw.call(op::SET_DATA, &set_data("/o")).await;
    assert_eq!(h.err, 0);
    // Errors carry the code and no body; reads carry the member's last zxid.
    let (h, _) = raw
        .call(
            op::DELETE,
            &Request::Delete(PathVersion {
                path: "/o".into(),
                version: 9,
            }),
        )
        .await;
    assert_eq!(h.err, -103);
    let (h, _) = raw
        .call(
            op::EXISTS,
            &Request::Exists(PathWatch {
                path: "/none".into(),
                watch: false,
            }),
        )
        .await;
    assert_eq!(h.err, -101);
    assert!(h.zxid > event_zxid, "a read reports the last applied zxid");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_watches_fires_what_changed_while_away() {
    let server = TestServer::start(common::fast_options()).await;
    let (mut raw, resp) = Raw::session(server.addr()).await;
    for p in ["/same", "/changed", "/gone", "/parent"] {
        raw.call(op::CREATE, &create(p)).await;
    }
    let (h, _) = raw
        .call(
            op::EXISTS,
            &Request::Exists(PathWatch {
                path: "/same".into(),
                watch: false,
            }),
        )
        .await;
    let seen = h.zxid;
    drop(raw);
    let other = server.client(Duration::from_secs(2)).await;
    other.set_data("/changed", b"x", None).await.unwrap();
    other.delete("/gone", None).await.unwrap();
    other
        .create(
            "/born",
            b"",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    other
        .create(
            "/parent/kid",
            b"",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();

    let mut raw = Raw::open(server.addr()).await;
    let answer = raw
        .handshake(resp.session_id, &resp.password, seen, 2000)
        .await
        .expect("reattach");
    assert_eq!(answer.session_id, resp.session_id);
    let sw = SetWatches {
        relative_zxid: seen,
        data: vec!["/same".into(), "/changed".into(), "/gone".into()],
        exist: vec!["/born".into(), "/unborn".into()],
        child: vec!["/parent".into()],
        persistent: vec![],
        persistent_recursive: vec![],
    };
    raw.send(op::SET_WATCHES, &Request::SetWatches(sw)).await;
    let mut events = Vec::new();
    loop {
        match raw.frame().await {
            Frame::Event(_, e) => events.push((e.kind, e.path)),
            Frame::Reply(h, _) => {
                assert_eq!((h.xid, h.err), (xid::SET_WATCHES, 0));
                break;
            }
        }
    }
    let events: Vec<(i32, &str)> = events.iter().map(|(k, p)| (*k, p.as_str())).collect();
    assert_eq!(
        events,
        [(3, "/changed"), (2, "/gone"), (1, "/born"), (4, "/parent")]
    );
    // The watches that had nothing to report are registered.
    other
        .create(
            "/unborn",
            b"",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let Frame::Event(_, e) = raw.frame().await else {
        panic!("exist watch")
    };
    assert_eq!((e.kind, e.path.as_str()), (1, "/unborn"));
    other.set_data("/same", b"y", None).await.unwrap();
    let Frame::Event(_, e) = raw.frame().await else {
        panic!("data watch")
    };
    assert_eq!((e.kind, e.path.as_str()), (3, "/same"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_closes_the_connection_and_no_leader_means_connection_loss() {
    let server = TestServer::start(common::fast_options()).await;
    // A session that never pings expires (200 ms minimum), and its connection is closed.
    let mut silent = Raw::open(server.addr()).await;
    let resp = silent.handshake(0, &[0; 16], 0, 1).await.expect("session");
    assert_eq!(resp.timeout_ms, 200, "raised to 2 ticks");
    assert!(silent.closed().await);
    let mut late = Raw::open(server.addr()).await;
    let answer = late
        .handshake(resp.session_id, &resp.password, 0, 200)
        .await
        .expect("answer");
    assert_eq!(answer.session_id, 0, "expired");

    // Without a leader, reads are still served locally; writes close the connection.
    let (mut raw, _) = Raw::session(server.addr()).await;
    raw.call(op::CREATE, &create("/k")).await;
    server.replicator.set_leaderless(true);
    let (h, _) = raw.call(op::GET_DATA, &get_data("/k", false)).await;
    assert_eq!(h.err, 0);
    raw.send(op::SET_DATA, &set_data("/k")).await;
    assert!(raw.closed().await);
    assert!(four_letter(server.addr(), "srvr")
        .await
        .contains("not currently serving"));
    server.replicator.set_leaderless(false);
    server.stop().await;
}

/// closeSession is answered (xid, zxid, OK) and only then is the connection closed, as
/// ZooKeeper does; the session's end must not close the connection that asked for it
/// first. The two race in the server, so the test closes many sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_session_is_answered_before_the_connection_closes() {
    let server = TestServer::start(common::fast_options()).await;
    for i in 0..40 {
        let (mut raw, _) = Raw::session(server.addr()).await;
        let (h, _) = raw.call(op::CREATE, &create(&format!("/e{i}"))).await;
        assert_eq!(h.err, 0);
        let (h, _) = raw.call(op::CLOSE_SESSION, &Request::CloseSession).await;
        assert_eq!(h.err, 0, "closeSession answered OK");
        assert!(raw.closed().await, "then the connection closes");
    }
    server.stop().await;
}
