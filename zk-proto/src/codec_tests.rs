//! Codec tests: every record, request and reply body round-trips; truncated, extended and
//! random bytes give errors, never panics.

use coordbench_tree::Stat;

use crate::jute::{DecodeError, Reader, Writer};
use crate::proto::*;
use crate::reply::{MultiResult, ReadResult, ReplyBody};
use crate::request::{self, MultiOp, ReadOp, Request};

fn stat(seed: i64) -> Stat {
    Stat {
        czxid: seed,
        mzxid: seed + 1,
        ctime: -seed,
        mtime: i64::MAX - seed,
        version: 3,
        cversion: -1,
        aversion: 0,
        ephemeral_owner: i64::MIN,
        data_length: 7,
        num_children: 2,
        pzxid: seed + 2,
    }
}

/// Encodes with `enc`, checks `dec` gives `value` back using every byte, and that every
/// strict prefix fails.
fn round_trip<T: PartialEq + std::fmt::Debug>(
    value: &T,
    enc: impl Fn(&T, &mut Writer),
    dec: impl Fn(&mut Reader) -> Result<T, DecodeError>,
) {
    check_round_trip(value, enc, dec, false)
}

/// As [`round_trip`], for records whose last byte (a readOnly flag) is optional.
fn round_trip_optional_tail<T: PartialEq + std::fmt::Debug>(
    value: &T,
    enc: impl Fn(&T, &mut Writer),
    dec: impl Fn(&mut Reader) -> Result<T, DecodeError>,
) {
    check_round_trip(value, enc, dec, true)
}

fn check_round_trip<T: PartialEq + std::fmt::Debug>(
    value: &T,
    enc: impl Fn(&T, &mut Writer),
    dec: impl Fn(&mut Reader) -> Result<T, DecodeError>,
    optional_tail: bool,
) {
    let mut w = Writer::new();
    enc(value, &mut w);
    let mut r = Reader::new(&w.buf);
    assert_eq!(dec(&mut r).as_ref(), Ok(value));
    assert_eq!(r.finish(), Ok(()));
    for cut in 0..w.buf.len() {
        let mut r = Reader::new(&w.buf[..cut]);
        let whole = dec(&mut r).and_then(|_| r.finish());
        let allowed = optional_tail && cut + 1 == w.buf.len();
        assert!(
            whole.is_err() || allowed,
            "prefix {cut} of {value:?} decoded"
        );
    }
}

#[test]
fn records_round_trip() {
    round_trip(&stat(5), |s, w| encode_stat(w, s), decode_stat);
    for read_only in [None, Some(true), Some(false)] {
        let r = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0x1_0000_0002,
            timeout_ms: 30_000,
            session_id: 77,
            password: vec![1; 16],
            read_only,
        };
        round_trip_optional_tail(&r, ConnectRequest::encode, ConnectRequest::decode);
    }
    let r = ConnectResponse {
        protocol_version: 0,
        timeout_ms: 4000,
        session_id: -3,
        password: vec![2; 16],
        read_only: false,
    };
    round_trip_optional_tail(&r, ConnectResponse::encode, ConnectResponse::decode);
    round_trip_optional_tail(
        &ConnectResponse::expired(),
        ConnectResponse::encode,
        ConnectResponse::decode,
    );
    round_trip(
        &RequestHeader {
            xid: -8,
            op: op::SET_WATCHES2,
        },
        RequestHeader::encode,
        RequestHeader::decode,
    );
    round_trip(
        &ReplyHeader {
            xid: 9,
            zxid: -1,
            err: -101,
        },
        ReplyHeader::encode,
        ReplyHeader::decode,
    );
    let e = WatcherEvent {
        kind: 4,
        state: STATE_SYNC_CONNECTED,
        path: "/a/é".into(),
    };
    round_trip(&e, WatcherEvent::encode, WatcherEvent::decode);
    round_trip(&Acl::open(), Acl::encode, Acl::decode);
    for ttl in [None, Some(1000)] {
        let c = CreateRequest {
            path: "/x-".into(),
            data: Some(vec![0, 1, 255]),
            acl: vec![
                Acl::open().into(),
                Acl {
                    perms: 1,
                    scheme: "digest".into(),
                    id: "u:p".into(),
                }
                .into(),
                WireAcl {
                    perms: 31,
                    scheme: None,
                    id: None,
                },
            ],
            flags: 6,
            ttl,
        };
        round_trip(&c, CreateRequest::encode, |r| {
            CreateRequest::decode(r, ttl.is_some())
        });
    }
    round_trip(
        &PathVersion {
            path: "/p".into(),
            version: -1,
        },
        PathVersion::encode,
        PathVersion::decode,
    );
    round_trip(
        &PathWatch {
            path: "/p".into(),
            watch: true,
        },
        PathWatch::encode,
        PathWatch::decode,
    );
    round_trip(
        &PathMode {
            path: "/".into(),
            mode: 1,
        },
        PathMode::encode,
        PathMode::decode,
    );
    let s = SetDataRequest {
        path: "/p".into(),
        data: None,
        version: 4,
    };
    round_trip(&s, SetDataRequest::encode, SetDataRequest::decode);
    for v2 in [false, true] {
        let sw = SetWatches {
            relative_zxid: 12,
            data: vec!["/a".into()],
            exist: vec![],
            child: vec!["/b".into(), "/c".into()],
            persistent: if v2 { vec!["/p".into()] } else { vec![] },
            persistent_recursive: if v2 { vec!["/r".into()] } else { vec![] },
        };
        round_trip(&sw, |s, w| s.encode(w, v2), |r| SetWatches::decode(r, v2));
    }
    round_trip(&MultiHeader::END, MultiHeader::encode, MultiHeader::decode);
    let a = AuthPacket {
        kind: 0,
        scheme: "digest".into(),
        auth: b"u:p".to_vec(),
    };
    round_trip(&a, AuthPacket::encode, AuthPacket::decode);
}

fn all_requests() -> Vec<(i32, Request)> {
    let create = |flags, ttl| CreateRequest {
        path: "/n".into(),
        data: Some(b"d".to_vec()),
        acl: vec![Acl::open().into()],
        flags,
        ttl,
    };
    let pv = || PathVersion {
        path: "/n".into(),
        version: 2,
    };
    let pw = |watch| PathWatch {
        path: "/n".into(),
        watch,
    };
    let pm = |mode| PathMode {
        path: "/n".into(),
        mode,
    };
    let sd = || SetDataRequest {
        path: "/n".into(),
        data: Some(vec![1]),
        version: -1,
    };
    let sw = SetWatches {
        relative_zxid: 3,
        data: vec!["/d".into()],
        exist: vec!["/e".into()],
        child: vec!["/c".into()],
        persistent: vec!["/p".into()],
        persistent_recursive: vec!["/r".into()],
    };
    vec![
        (op::PING, Request::Ping),
        (op::CLOSE_SESSION, Request::CloseSession),
        (
            op::CREATE,
            Request::Create {
                op: op::CREATE,
                req: create(0, None),
            },
        ),
        (
            op::CREATE2,
            Request::Create {
                op: op::CREATE2,
                req: create(3, None),
            },
        ),
        (
            op::CREATE_CONTAINER,
            Request::Create {
                op: op::CREATE_CONTAINER,
                req: create(4, None),
            },
        ),
        (
            op::CREATE_TTL,
            Request::Create {
                op: op::CREATE_TTL,
                req: create(5, Some(60_000)),
            },
        ),
        (op::DELETE, Request::Delete(pv())),
        (op::EXISTS, Request::Exists(pw(true))),
        (op::GET_DATA, Request::GetData(pw(false))),
        (op::SET_DATA, Request::SetData(sd())),
        (
            op::GET_CHILDREN,
            Request::GetChildren {
                req: pw(true),
                with_stat: false,
            },
        ),
        (
            op::GET_CHILDREN2,
            Request::GetChildren {
                req: pw(false),
                with_stat: true,
            },
        ),
        (op::GET_ACL, Request::GetAcl("/n".into())),
        (op::SYNC, Request::Sync("/n".into())),
        (op::CHECK, Request::Check(pv())),
        (
            op::MULTI,
            Request::Multi(vec![
                MultiOp::Create {
                    op: op::CREATE2,
                    req: create(2, None),
                },
                MultiOp::Create {
                    op: op::CREATE_TTL,
                    req: create(5, Some(9)),
                },
                MultiOp::Delete(pv()),
                MultiOp::SetData(sd()),
                MultiOp::Check(pv()),
            ]),
        ),
        (op::MULTI, Request::Multi(vec![])),
        (
            op::MULTI_READ,
            Request::MultiRead(vec![
                ReadOp::GetData("/a".into()),
                ReadOp::GetChildren("/b".into()),
            ]),
        ),
        (op::SET_WATCHES2, Request::SetWatches(sw.clone())),
        (
            op::SET_WATCHES,
            Request::SetWatches(SetWatches {
                persistent: vec![],
                persistent_recursive: vec![],
                ..sw
            }),
        ),
        (op::ADD_WATCH, Request::AddWatch(pm(1))),
        (op::REMOVE_WATCHES, Request::RemoveWatches(pm(3))),
        (op::CHECK_WATCHES, Request::CheckWatches(pm(2))),
        (op::GET_EPHEMERALS, Request::GetEphemerals("/".into())),
        (
            op::GET_ALL_CHILDREN_NUMBER,
            Request::GetAllChildrenNumber("/n".into()),
        ),
        (
            op::AUTH,
            Request::Auth(AuthPacket {
                kind: 0,
                scheme: "digest".into(),
                auth: vec![1],
            }),
        ),
        (op::WHO_AM_I, Request::WhoAmI),
        (op::RECONFIG, Request::Unsupported(op::RECONFIG)),
        (4242, Request::Unsupported(4242)),
    ]
}

#[test]
fn requests_round_trip() {
    for (code, req) in all_requests() {
        let header = RequestHeader { xid: 7, op: code };
        let mut w = Writer::new();
        request::encode(header, &req, &mut w);
        assert_eq!(
            request::decode(&w.buf),
            Ok((header, req.clone())),
            "{req:?}"
        );
        if matches!(req, Request::Unsupported(_)) {
            continue;
        }
        let mut longer = w.buf.clone();
        longer.push(0);
        assert!(
            request::decode(&longer).is_err(),
            "trailing byte after {req:?}"
        );
        for cut in 0..w.buf.len() {
            let fixed =
                matches!(req, Request::Ping | Request::CloseSession | Request::WhoAmI) && cut == 8;
            assert!(
                fixed || request::decode(&w.buf[..cut]).is_err(),
                "prefix {cut} of {req:?}"
            );
        }
    }
}

#[test]
fn multi_with_a_read_op_is_malformed() {
    let mut w = Writer::new();
    RequestHeader {
        xid: 1,
        op: op::MULTI,
    }
    .encode(&mut w);
    MultiHeader {
        op: op::GET_DATA,
        done: false,
        err: -1,
    }
    .encode(&mut w);
    PathWatch {
        path: "/a".into(),
        watch: false,
    }
    .encode(&mut w);
    MultiHeader::END.encode(&mut w);
    assert_eq!(
        request::decode(&w.buf),
        Err(DecodeError::BadMultiOp(op::GET_DATA))
    );
}

#[test]
fn reply_bodies_round_trip() {
    let bodies = vec![
        (op::DELETE, ReplyBody::Empty),
        (op::CREATE, ReplyBody::Path("/a".into())),
        (op::SYNC, ReplyBody::Path("/".into())),
        (
            op::CREATE2,
            ReplyBody::Create2 {
                path: "/a".into(),
                stat: stat(1),
            },
        ),
        (op::EXISTS, ReplyBody::Stat(stat(2))),
        (
            op::GET_DATA,
            ReplyBody::Data {
                data: Some(b"v".to_vec()),
                stat: stat(3),
            },
        ),
        (
            op::GET_CHILDREN,
            ReplyBody::Strings(vec!["a".into(), "b".into()]),
        ),
        (
            op::GET_CHILDREN2,
            ReplyBody::Children2 {
                children: vec![],
                stat: stat(4),
            },
        ),
        (
            op::GET_ACL,
            ReplyBody::Acl {
                acl: vec![Acl::open()],
                stat: stat(5),
            },
        ),
        (
            op::MULTI,
            ReplyBody::Multi(vec![
                MultiResult::Create("/a".into()),
                MultiResult::Create2 {
                    path: "/b".into(),
                    stat: stat(6),
                },
                MultiResult::Delete,
                MultiResult::SetData(stat(7)),
                MultiResult::Check,
            ]),
        ),
        (
            op::MULTI,
            ReplyBody::Multi(vec![
                MultiResult::Error(0),
                MultiResult::Error(-103),
                MultiResult::Error(-2),
            ]),
        ),
        (
            op::MULTI_READ,
            ReplyBody::MultiRead(vec![
                ReadResult::Data {
                    data: None,
                    stat: stat(8),
                },
                ReadResult::Children(vec!["x".into()]),
                ReadResult::Error(-101),
            ]),
        ),
        (op::GET_ALL_CHILDREN_NUMBER, ReplyBody::Int(12)),
        (
            op::WHO_AM_I,
            ReplyBody::WhoAmI(vec![("ip".into(), "127.0.0.1".into())]),
        ),
    ];
    for (code, body) in bodies {
        round_trip(&body, ReplyBody::encode, |r| {
            let b = ReplyBody::decode(code, r)?;
            Ok(b)
        });
    }
}

#[test]
fn reply_frames_omit_bodies_on_error() {
    let ok = crate::reply::reply_frame(1, 2, 0, &ReplyBody::Stat(stat(1)));
    assert_eq!(ok.len(), 4 + 16 + 68);
    let failed = crate::reply::reply_frame(1, 2, -101, &ReplyBody::Stat(stat(1)));
    assert_eq!(
        failed,
        [0, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0x9b]
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let ops: Vec<i32> = all_requests().into_iter().map(|(c, _)| c).collect();
    for i in 0..20_000usize {
        let len = (next() % 96) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Give most inputs a real header so the record decoders get exercised.
        if i % 4 != 0 && bytes.len() >= 8 {
            let code = ops[(next() as usize) % ops.len()];
            bytes[4..8].copy_from_slice(&code.to_be_bytes());
        }
        let _ = request::decode(&bytes);
        let _ = ConnectRequest::decode(&mut Reader::new(&bytes));
        for code in [
            op::MULTI,
            op::MULTI_READ,
            op::GET_ACL,
            op::WHO_AM_I,
            op::GET_DATA,
        ] {
            let _ = ReplyBody::decode(code, &mut Reader::new(&bytes));
        }
    }
}
