//! ZooKeeper's semantics, case by case: stats, sequential names, ephemerals, containers,
//! TTL nodes, sessions and multi.

use coordbench_tree::*;

struct T {
    tree: DataTree,
    zxid: i64,
}

impl T {
    fn new() -> T {
        T {
            tree: DataTree::new(),
            zxid: 0,
        }
    }
    fn run(&mut self, cmd: Command) -> Applied {
        self.zxid += 1;
        let a = self.tree.apply(self.zxid, &cmd);
        self.tree.check_invariants().unwrap();
        a
    }
    fn write(&mut self, session: i64, now_ms: i64, op: Op) -> Result<OpResult, TreeError> {
        match self
            .run(Command::Write {
                session,
                now_ms,
                op,
                auth: vec![],
            })
            .result?
        {
            Response::Op(r) => Ok(r),
            other => panic!("{other:?}"),
        }
    }
    fn create(&mut self, session: i64, path: &str, mode: CreateMode) -> Result<String, TreeError> {
        let ttl_ms = if mode.is_ttl() { 100 } else { 0 };
        match self.write(
            session,
            1000,
            Op::Create {
                path: path.into(),
                data: Some(b"d".to_vec()),
                mode,
                ttl_ms,
                acl: vec![Acl::open()],
            },
        )? {
            OpResult::Create { path, .. } => Ok(path),
            other => panic!("{other:?}"),
        }
    }
    fn session(&mut self, timeout_ms: i32, now_ms: i64) -> i64 {
        match self
            .run(Command::CreateSession {
                timeout_ms,
                password: vec![0; 16],
                now_ms,
            })
            .result
        {
            Ok(Response::SessionCreated { session, .. }) => session,
            other => panic!("{other:?}"),
        }
    }
}

fn delete(path: &str, version: i32) -> Op {
    Op::Delete {
        path: path.into(),
        version,
    }
}

#[test]
fn stats_follow_zookeeper() {
    let mut t = T::new();
    t.create(0, "/a", CreateMode::Persistent).unwrap();
    let st = t.tree.stat("/a").unwrap();
    assert_eq!((st.czxid, st.mzxid, st.pzxid), (1, 1, 1));
    assert_eq!(
        (st.ctime, st.mtime, st.version, st.data_length),
        (1000, 1000, 0, 1)
    );
    t.write(
        0,
        2000,
        Op::SetData {
            path: "/a".into(),
            data: Some(b"xyz".to_vec()),
            version: 0,
        },
    )
    .unwrap();
    let st = t.tree.stat("/a").unwrap();
    assert_eq!(
        (st.czxid, st.mzxid, st.mtime, st.version, st.data_length),
        (1, 2, 2000, 1, 3)
    );
    assert_eq!(
        t.write(
            0,
            0,
            Op::SetData {
                path: "/a".into(),
                data: Some(vec![]),
                version: 0
            }
        ),
        Err(TreeError::BadVersion)
    );
    t.create(0, "/a/b", CreateMode::Persistent).unwrap();
    let st = t.tree.stat("/a").unwrap();
    assert_eq!(
        (st.cversion, st.pzxid, st.num_children, st.mzxid),
        (1, 4, 1, 2)
    );
    t.write(0, 0, delete("/a/b", -1)).unwrap();
    let st = t.tree.stat("/a").unwrap();
    assert_eq!(
        (st.cversion, st.pzxid, st.num_children),
        (2, 5, 0),
        "a delete counts in cversion, as in ZooKeeper 3.8"
    );
    assert_eq!(t.write(0, 0, delete("/a", 3)), Err(TreeError::BadVersion));
    assert_eq!(t.write(0, 0, delete("/nope", -1)), Err(TreeError::NoNode));
    assert!(matches!(
        t.write(0, 0, delete("/", -1)),
        Err(TreeError::BadArguments(_))
    ));
    assert_eq!(t.tree.children("/").unwrap().0, vec!["a", "zookeeper"]);
    assert_eq!(
        t.tree.children("/zookeeper").unwrap().0,
        vec!["config", "quota"]
    );
}

#[test]
fn sequential_names_count_creates_in_the_parent() {
    let mut t = T::new();
    t.create(0, "/q", CreateMode::Persistent).unwrap();
    assert_eq!(
        t.create(0, "/q/n-", CreateMode::PersistentSequential)
            .unwrap(),
        "/q/n-0000000000"
    );
    t.create(0, "/q/other", CreateMode::Persistent).unwrap();
    t.write(0, 0, delete("/q/n-0000000000", -1)).unwrap();
    assert_eq!(
        t.create(0, "/q/n-", CreateMode::PersistentSequential)
            .unwrap(),
        "/q/n-0000000002"
    );
    assert_eq!(
        t.create(0, "/q/", CreateMode::PersistentSequential)
            .unwrap(),
        "/q/0000000003"
    );
    assert_eq!(
        t.create(0, "/q/n-", CreateMode::Persistent).unwrap(),
        "/q/n-"
    );
    assert_eq!(
        t.create(0, "/q/n-", CreateMode::Persistent),
        Err(TreeError::NodeExists)
    );
    assert_eq!(
        t.create(0, "/missing/n-", CreateMode::PersistentSequential),
        Err(TreeError::NoNode)
    );
}

/// What Debian's ZooKeeper 3.8.0 answers (zkCli.sh): sequence numbers count the children
/// ever created, while cversion counts deletes too, including a session's ephemerals.
#[test]
fn sequence_numbers_skip_deletes_that_cversion_counts() {
    let mut t = T::new();
    t.create(0, "/r", CreateMode::Persistent).unwrap();
    t.create(0, "/r/a", CreateMode::Persistent).unwrap();
    t.write(0, 0, delete("/r/a", -1)).unwrap();
    assert_eq!(
        t.create(0, "/r/s-", CreateMode::PersistentSequential)
            .unwrap(),
        "/r/s-0000000001"
    );
    assert_eq!(t.tree.stat("/r").unwrap().cversion, 3);
    // Three more, two deletes, then a session ends and takes its ephemeral with it.
    let s = t.session(30_000, 0);
    for _ in 0..2 {
        t.create(0, "/r/s-", CreateMode::PersistentSequential)
            .unwrap();
    }
    let e = t
        .create(s, "/r/e-", CreateMode::EphemeralSequential)
        .unwrap();
    assert_eq!(e, "/r/e-0000000004");
    t.write(0, 0, delete("/r/s-0000000001", -1)).unwrap();
    t.write(0, 0, delete("/r/s-0000000002", -1)).unwrap();
    t.run(Command::CloseSession { session: s });
    let st = t.tree.stat("/r").unwrap();
    assert_eq!((st.cversion, st.num_children), (9, 1));
    assert_eq!(
        t.create(0, "/r/s-", CreateMode::PersistentSequential)
            .unwrap(),
        "/r/s-0000000005"
    );
}

#[test]
fn ephemerals_belong_to_sessions() {
    let mut t = T::new();
    let s = t.session(4000, 0);
    assert_eq!(s, 1, "a session's id is its zxid");
    let e = t.create(s, "/e", CreateMode::Ephemeral).unwrap();
    assert_eq!(t.tree.stat(&e).unwrap().ephemeral_owner, s);
    assert_eq!(
        t.create(s, "/e/kid", CreateMode::Persistent),
        Err(TreeError::NoChildrenForEphemerals)
    );
    assert!(matches!(
        t.create(0, "/e2", CreateMode::Ephemeral),
        Err(TreeError::BadArguments(_))
    ));
    assert_eq!(
        t.create(99, "/x", CreateMode::Persistent),
        Err(TreeError::SessionExpired)
    );
    t.create(s, "/es-", CreateMode::EphemeralSequential)
        .unwrap();
    assert_eq!(t.tree.ephemerals(s, "/"), vec!["/e", "/es-0000000001"]);
    assert_eq!(t.tree.ephemeral_count(), 2);
    // Not expired before its deadline; a touch moves the deadline.
    assert!(t.tree.expired_sessions(3999).is_empty());
    t.run(Command::TouchSessions {
        sessions: vec![s, 77],
        now_ms: 3000,
    });
    assert_eq!(t.tree.session(s).unwrap().deadline_ms, 7000);
    let a = t.run(Command::ExpireSessions {
        sessions: vec![s],
        now_ms: 6999,
    });
    assert_eq!(
        a.result,
        Ok(Response::Expired { sessions: vec![] }),
        "touched in between"
    );
    let a = t.run(Command::ExpireSessions {
        sessions: vec![s],
        now_ms: 7000,
    });
    assert_eq!(a.result, Ok(Response::Expired { sessions: vec![s] }));
    assert_eq!(a.ended_sessions, vec![s]);
    let kinds: Vec<(EventType, &str)> =
        a.events.iter().map(|e| (e.kind, e.path.as_str())).collect();
    assert_eq!(
        kinds,
        vec![
            (EventType::NodeDeleted, "/e"),
            (EventType::NodeChildrenChanged, "/"),
            (EventType::NodeDeleted, "/es-0000000001"),
            (EventType::NodeChildrenChanged, "/"),
        ]
    );
    assert!(t.tree.stat("/e").is_none());
    assert!(t.tree.session(s).is_none());
}

#[test]
fn close_and_renew_all() {
    let mut t = T::new();
    let s = t.session(1000, 0);
    let u = t.session(5000, 0);
    t.create(s, "/e", CreateMode::Ephemeral).unwrap();
    t.run(Command::RenewAllSessions { now_ms: 100_000 });
    assert_eq!(t.tree.session(s).unwrap().deadline_ms, 101_000);
    assert_eq!(t.tree.expired_sessions(101_000), vec![s]);
    let a = t.run(Command::CloseSession { session: s });
    assert_eq!(a.result, Ok(Response::SessionClosed { existed: true }));
    assert_eq!(a.ended_sessions, vec![s]);
    assert!(t.tree.stat("/e").is_none());
    let a = t.run(Command::CloseSession { session: s });
    assert_eq!(a.result, Ok(Response::SessionClosed { existed: false }));
    assert!(t.tree.session(u).is_some());
}

#[test]
fn containers_and_ttl_nodes_are_reaped_when_due() {
    let mut t = T::new();
    t.create(0, "/c", CreateMode::Container).unwrap();
    t.create(0, "/t", CreateMode::PersistentWithTtl).unwrap();
    // Clients see 0 for containers, as ZooKeeper shows them (its stored marker is hidden).
    assert_eq!(t.tree.stat("/c").unwrap().ephemeral_owner, 0);
    assert!(
        t.tree.reap_candidates(1050).is_empty(),
        "never had children; TTL not passed"
    );
    t.create(0, "/c/x", CreateMode::Persistent).unwrap();
    assert!(t.tree.reap_candidates(1000).is_empty(), "not empty");
    t.write(0, 0, delete("/c/x", -1)).unwrap();
    assert_eq!(t.tree.reap_candidates(1101), vec!["/c", "/t"]);
    // A node that gained a child since the leader looked is kept.
    t.create(0, "/c/y", CreateMode::Persistent).unwrap();
    let a = t.run(Command::Reap {
        paths: vec!["/c".into(), "/t".into()],
        now_ms: 1101,
    });
    assert_eq!(
        a.result,
        Ok(Response::Reaped {
            paths: vec!["/t".into()]
        })
    );
    assert!(t.tree.stat("/c").is_some());
    assert!(t.tree.stat("/t").is_none());
}

#[test]
fn multi_is_all_or_nothing() {
    let mut t = T::new();
    t.create(0, "/m", CreateMode::Persistent).unwrap();
    let ops = vec![
        Op::Create {
            path: "/m/a".into(),
            data: Some(vec![]),
            mode: CreateMode::Persistent,
            ttl_ms: 0,
            acl: vec![Acl::open()],
        },
        Op::SetData {
            path: "/m".into(),
            data: Some(b"x".to_vec()),
            version: 0,
        },
        Op::Create {
            path: "/m/s-".into(),
            data: Some(vec![]),
            mode: CreateMode::PersistentSequential,
            ttl_ms: 0,
            acl: vec![Acl::open()],
        },
        Op::Check {
            path: "/m".into(),
            version: 5,
        },
    ];
    let before = t.tree.snapshot();
    let a = t.run(Command::Multi {
        session: 0,
        now_ms: 5,
        ops: ops.clone(),
        auth: vec![],
    });
    assert_eq!(
        a.result,
        Ok(Response::Multi(MultiOutcome::Aborted {
            index: 3,
            error: TreeError::BadVersion
        }))
    );
    assert!(a.events.is_empty());
    let mut after = t.tree.clone();
    after.restore(&before).unwrap();
    assert_eq!(t.tree.children("/m"), after.children("/m"));
    assert_eq!(
        t.tree.stat("/m"),
        after.stat("/m"),
        "cversion and pzxid rolled back"
    );
    let mut ok = ops;
    ok[3] = Op::Check {
        path: "/m".into(),
        version: 1,
    };
    ok.push(delete("/m/a", 0));
    let a = t.run(Command::Multi {
        session: 0,
        now_ms: 5,
        ops: ok,
        auth: vec![],
    });
    let Ok(Response::Multi(MultiOutcome::Committed(rs))) = a.result else {
        panic!("{a:?}")
    };
    assert_eq!(rs.len(), 5);
    assert!(matches!(&rs[2], OpResult::Create { path, .. } if path == "/m/s-0000000001"));
    assert_eq!(t.tree.children("/m").unwrap().0, vec!["s-0000000001"]);
    assert!(a.events.iter().all(|e| e.zxid == a.zxid));
    assert_eq!(a.events.len(), 2 + 1 + 2 + 2);

    // A refused op fails the multi where it stands, unless an earlier op failed first.
    let refuse = Op::Refuse {
        error: TreeError::Marshalling,
    };
    for (first, index, error) in [
        (delete("/m/none", -1), 0, TreeError::NoNode),
        (delete("/m/s-0000000001", -1), 1, TreeError::Marshalling),
    ] {
        let a = t.run(Command::Multi {
            session: 0,
            now_ms: 6,
            ops: vec![first, refuse.clone()],
            auth: vec![],
        });
        let outcome = MultiOutcome::Aborted { index, error };
        assert_eq!(a.result, Ok(Response::Multi(outcome)));
    }
    assert_eq!(t.tree.children("/m").unwrap().0, vec!["s-0000000001"]);
}

#[test]
fn old_zxids_change_nothing() {
    let mut t = T::new();
    t.create(0, "/a", CreateMode::Persistent).unwrap();
    let a = t.tree.apply(1, &Command::CloseSession { session: 1 });
    assert!(matches!(a.result, Err(TreeError::AlreadyApplied { .. })));
    assert_eq!(t.tree.last_zxid(), 1);
    assert_eq!(t.tree.descendant_count("/").unwrap(), 4);
    assert_eq!(t.tree.descendant_count("/zookeeper").unwrap(), 2);
    assert_eq!(t.tree.node_count(), 5);
}

#[test]
fn acls_guard_writes_as_zookeeper_does() {
    let mut t = T::new();
    let alice = vec![Id::new("digest", "alice:h")];
    let creator_all = Acl {
        perms: acl::perm::ALL,
        scheme: "auth".into(),
        id: String::new(),
    };
    let create = |path: &str, acl: Acl| Op::Create {
        path: path.into(),
        data: Some(vec![]),
        mode: CreateMode::Persistent,
        ttl_ms: 0,
        acl: vec![acl],
    };
    let as_ids = |t: &mut T, op: Op, auth: &[Id]| {
        t.run(Command::Write {
            session: 0,
            now_ms: 1,
            op,
            auth: auth.to_vec(),
        })
        .result
        .map(|_| ())
    };
    // `auth` without an authenticated id is invalid; with one it becomes that id.
    assert_eq!(
        as_ids(&mut t, create("/p", creator_all.clone()), &[]),
        Err(TreeError::InvalidAcl)
    );
    as_ids(&mut t, create("/p", creator_all), &alice).unwrap();
    assert_eq!(t.tree.acl("/p").unwrap().0[0].id, "alice:h");
    let set = |v: &[u8]| Op::SetData {
        path: "/p".into(),
        data: Some(v.to_vec()),
        version: -1,
    };
    assert_eq!(as_ids(&mut t, set(b"x"), &[]), Err(TreeError::NoAuth));
    assert_eq!(
        as_ids(&mut t, create("/p/c", Acl::open()), &[]),
        Err(TreeError::NoAuth)
    );
    as_ids(&mut t, set(b"x"), &alice).unwrap();
    as_ids(&mut t, create("/p/c", Acl::open()), &alice).unwrap();
    assert_eq!(
        as_ids(&mut t, delete("/p/c", -1), &[]),
        Err(TreeError::NoAuth)
    );
    let open_up = Op::SetAcl {
        path: "/p".into(),
        acl: vec![Acl::open()],
        version: 0,
    };
    assert_eq!(as_ids(&mut t, open_up.clone(), &[]), Err(TreeError::NoAuth));
    as_ids(&mut t, open_up, &alice).unwrap();
    assert_eq!(t.tree.stat("/p").unwrap().aversion, 1);
    as_ids(&mut t, delete("/p/c", -1), &[]).unwrap();
}
