//! etcd's auth on the built-in Raft engine, driven by Debian's real etcdctl (3.4) against
//! a 3-member raft cluster of `coordbench serve raft` processes on 127.0.0.1, and the same
//! etcdctl sequence against a real etcd as the control: users, roles, key-range and prefix
//! permissions, `auth enable`, authenticated puts and gets, refused ones (no user, a wrong
//! password, a key outside the user's roles, a non-root user managing auth, deleting root),
//! and `auth disable`. Every step's outcome (output, or etcdctl's `Error:` line) must be
//! the same on both. Then, on raft alone: the auth state survives a restart of every member
//! (it is in the log and the snapshots), and a watch on a key the user cannot read is
//! refused; through etcd's Rust client, locks, elections, leases and nested txns are
//! checked too. Skipped, with a note, where etcdctl or etcd is absent (failing under CI).

mod common;

use std::time::Duration;

use common::etcdctl::{ctl_outcome, present};
use common::{start_target, TargetKind};

const ETCD: &str = "/usr/bin/etcd";

type Outcome = Result<String, String>;

/// One step: who runs it (`None`: no user) and etcdctl's arguments.
struct Step {
    user: Option<&'static str>,
    args: &'static [&'static str],
}

const ROOT: Option<&str> = Some("root:rootpw");
const ALICE: Option<&str> = Some("alice:alicepw");

/// The sequence both servers are driven through (one step a line).
#[rustfmt::skip]
const STEPS: &[Step] = &[
    // Auth cannot be enabled without a root user (etcdctl adds the root role itself).
    Step { user: None, args: &["auth", "enable"] },
    Step { user: None, args: &["user", "add", "root", "--new-user-password=rootpw"] },
    Step { user: None, args: &["user", "grant-role", "root", "root"] },
    Step { user: None, args: &["role", "add", "app"] },
    Step { user: None, args: &["role", "grant-permission", "app", "readwrite", "--prefix", "app/"] },
    Step { user: None, args: &["role", "grant-permission", "app", "read", "config"] },
    Step { user: None, args: &["role", "grant-permission", "app", "write", "log/a", "log/c"] },
    Step { user: None, args: &["user", "add", "alice", "--new-user-password=alicepw"] },
    Step { user: None, args: &["user", "grant-role", "alice", "app"] },
    Step { user: None, args: &["user", "add", "nopw", "--no-password"] },
    Step { user: None, args: &["put", "config", "c1"] },
    Step { user: None, args: &["auth", "enable"] },
    // A user without a password cannot authenticate.
    Step { user: Some("nopw:x"), args: &["get", "app/x"] },
    Step { user: ALICE, args: &["put", "app/x", "1"] },
    Step { user: ALICE, args: &["get", "app/x"] },
    Step { user: ALICE, args: &["get", "--prefix", "app/"] },
    Step { user: ALICE, args: &["get", "config"] },
    Step { user: ALICE, args: &["put", "log/b", "w"] },
    // Refused: outside alice's roles, read-only, write-only, a range wider than granted.
    Step { user: ALICE, args: &["put", "other", "1"] },
    Step { user: ALICE, args: &["put", "config", "c2"] },
    Step { user: ALICE, args: &["get", "log/b"] },
    Step { user: ALICE, args: &["get", "--prefix", "app"] },
    Step { user: ALICE, args: &["del", "--prefix", "app/"] },
    Step { user: ALICE, args: &["txn"] },
    // A watch on keys alice cannot read is canceled at once (etcdctl exits).
    Step { user: ALICE, args: &["watch", "other"] },
    // No user, a wrong password.
    Step { user: None, args: &["get", "app/x"] },
    Step { user: Some("alice:wrong"), args: &["get", "app/x"] },
    Step { user: Some("mallory:pw"), args: &["get", "app/x"] },
    // Only root-role users manage auth; root bypasses permissions.
    Step { user: ALICE, args: &["user", "add", "bob", "--new-user-password=b"] },
    Step { user: ALICE, args: &["role", "list"] },
    // ... but may read their own user and the roles they hold.
    Step { user: ALICE, args: &["user", "get", "alice"] },
    Step { user: ALICE, args: &["role", "get", "app"] },
    Step { user: ALICE, args: &["user", "get", "root"] },
    Step { user: ALICE, args: &["role", "get", "root"] },
    Step { user: ROOT, args: &["put", "other", "root-was-here"] },
    Step { user: ROOT, args: &["get", "other"] },
    Step { user: ROOT, args: &["user", "get", "alice"] },
    Step { user: ROOT, args: &["role", "get", "app"] },
    Step { user: ROOT, args: &["user", "list"] },
    Step { user: ROOT, args: &["role", "list"] },
    Step { user: ROOT, args: &["user", "delete", "root"] },
    Step { user: ROOT, args: &["role", "delete", "root"] },
    Step { user: ROOT, args: &["user", "revoke-role", "alice", "nope"] },
    Step { user: ROOT, args: &["role", "revoke-permission", "app", "nope"] },
    Step { user: ROOT, args: &["user", "add", "alice", "--new-user-password=x"] },
    Step { user: ROOT, args: &["role", "revoke-permission", "app", "config"] },
    Step { user: ALICE, args: &["get", "config"] },
    Step { user: ROOT, args: &["user", "passwd", "alice", "--interactive=false"] },
    Step { user: ALICE, args: &["get", "app/x"] },
    Step { user: Some("alice:alicepw2"), args: &["get", "app/x"] },
    Step { user: ROOT, args: &["auth", "disable"] },
    Step { user: None, args: &["put", "other", "2"] },
    Step { user: None, args: &["get", "other", "--print-value-only"] },
];

/// A txn (read from stdin by etcdctl) comparing a key alice may read and writing one she
/// may not: refused as a whole.
const TXN: &str = "value(\"config\") = \"c1\"\n\nput other t\n\n\n";

/// What etcdctl reads from stdin for a step: the txn, or the new password.
fn stdin_of(args: &[&str]) -> Option<&'static str> {
    match args {
        ["txn"] => Some(TXN),
        ["user", "passwd", ..] => Some("alicepw2\n"),
        _ => None,
    }
}

/// Runs every step against `endpoint`; the outcomes in order.
async fn drive(endpoint: &str) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(STEPS.len());
    for step in STEPS {
        let mut args: Vec<String> = step.args.iter().map(|a| a.to_string()).collect();
        if let Some(user) = step.user {
            args.push(format!("--user={user}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        outcomes.push(ctl_outcome(endpoint, &args, stdin_of(step.args)).await);
    }
    outcomes
}

fn outcome_of<'a>(outcomes: &'a [Outcome], user: Option<&str>, args: &[&str]) -> &'a Outcome {
    let at = STEPS
        .iter()
        .position(|s| s.user == user && s.args == args)
        .expect("a step of the sequence");
    &outcomes[at]
}

/// What etcd-independent expectations hold of the raft cluster's outcomes.
fn check_raft(o: &[Outcome]) {
    let refused = |user, args: &[&str], message: &str| {
        assert_eq!(
            outcome_of(o, user, args),
            &Err(format!("Error: etcdserver: {message}")),
            "{user:?} {args:?}"
        );
    };
    refused(None, &["auth", "enable"], "root user does not exist");
    assert_eq!(
        outcome_of(o, ALICE, &["put", "app/x", "1"]),
        &Ok("OK\n".into())
    );
    assert_eq!(
        outcome_of(o, ALICE, &["get", "app/x"]),
        &Ok("app/x\n1\n".into())
    );
    refused(ALICE, &["put", "other", "1"], "permission denied");
    refused(ALICE, &["put", "config", "c2"], "permission denied");
    refused(ALICE, &["get", "log/b"], "permission denied");
    assert_eq!(
        outcome_of(o, ALICE, &["watch", "other"]),
        &Err("Error: watch is canceled by the server".into())
    );
    refused(None, &["get", "app/x"], "user name is empty");
    refused(
        Some("alice:wrong"),
        &["get", "app/x"],
        "authentication failed, invalid user ID or password",
    );
    refused(
        ALICE,
        &["user", "add", "bob", "--new-user-password=b"],
        "permission denied",
    );
    refused(ROOT, &["user", "delete", "root"], "invalid auth management");
    // A new password: the old one is refused, the new one works.
    let last = STEPS
        .iter()
        .rposition(|s| s.user == ALICE && s.args == ["get", "app/x"])
        .expect("a step");
    assert_eq!(
        o[last],
        Err("Error: etcdserver: authentication failed, invalid user ID or password".into())
    );
    assert!(outcome_of(o, Some("alice:alicepw2"), &["get", "app/x"]).is_ok());
    assert_eq!(
        outcome_of(o, None, &["get", "other", "--print-value-only"]),
        &Ok("2\n".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_auth_on_raft_matches_etcd() {
    if !present() {
        return;
    }
    let raft = start_target(TargetKind::Raft, 3).await;
    // etcdctl spreads its calls over the three members: followers forward writes, and a
    // token from one member holds on the others.
    let endpoints = raft.endpoints().join(",");
    let on_raft = drive(&endpoints).await;
    raft.stop();
    check_raft(&on_raft);
    if !coordbench_sim::tools::installed(ETCD) {
        return;
    }
    let etcd = start_target(TargetKind::Etcd, 1).await;
    let on_etcd = drive(&etcd.endpoints()[0]).await;
    etcd.stop();
    let mut differ = Vec::new();
    for ((step, r), e) in STEPS.iter().zip(&on_raft).zip(&on_etcd) {
        if r != e {
            differ.push(format!(
                "{:?} {:?}:\n  raft {r:?}\n  etcd {e:?}",
                step.user, step.args
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "raft and etcd differ:\n{}",
        differ.join("\n")
    );
}

/// Auth state is replicated state: after every member restarts (the WAL and snapshots
/// replayed), users, roles and the enabled flag are as before, and so is enforcement.
/// A watch on a key the user cannot read is answered created and canceled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_auth_survives_restart_and_refuses_watches() {
    if !present() {
        return;
    }
    let raft = start_target(TargetKind::Raft, 3).await;
    let mut raft = raft;
    let ep = raft.endpoints().join(",");
    let setup: &[&[&str]] = &[
        &["user", "add", "root", "--new-user-password=rootpw"],
        &["user", "grant-role", "root", "root"],
        &["role", "add", "app"],
        &[
            "role",
            "grant-permission",
            "app",
            "readwrite",
            "--prefix",
            "app/",
        ],
        &["user", "add", "alice", "--new-user-password=alicepw"],
        &["user", "grant-role", "alice", "app"],
        &["auth", "enable"],
    ];
    for args in setup {
        ctl_outcome(&ep, args, None)
            .await
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
    raft.cluster
        .kill_members(&[0, 1, 2])
        .expect("kill every member");
    for i in 0..3 {
        raft.cluster.restart_member(i).expect("restart a member");
    }
    let alice = "--user=alice:alicepw";
    // The first write after the restart waits for an elected leader.
    common::within(
        Duration::from_secs(30),
        "a write after the restart",
        async {
            loop {
                match ctl_outcome(&ep, &["put", "app/k", "v", alice], None).await {
                    Ok(out) => break assert_eq!(out, "OK\n"),
                    Err(e) if e.contains("permission denied") => panic!("{e}"),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        },
    )
    .await;
    assert_eq!(
        ctl_outcome(&ep, &["put", "k", "v", alice], None).await,
        Err("Error: etcdserver: permission denied".into())
    );
    assert_eq!(
        ctl_outcome(&ep, &["get", "app/k"], None).await,
        Err("Error: etcdserver: user name is empty".into())
    );
    let roles = ctl_outcome(&ep, &["user", "get", "alice", "--user=root:rootpw"], None).await;
    assert_eq!(roles, Ok("User: alice\nRoles: app\n".into()));
    // A refused watch is canceled by the server, and etcdctl exits.
    let watch = common::within(
        Duration::from_secs(20),
        "a refused watch ends",
        ctl_outcome(&ep, &["watch", "secret", alice], None),
    )
    .await;
    assert!(
        watch.as_ref().err().is_some_and(|e| e.contains("canceled")),
        "{watch:?}"
    );
    raft.stop();
}

/// What etcd-client sees of one call: `Ok`, or the status code (its name) and message it
/// was refused with.
fn refusal<T>(r: Result<T, etcd_client::Error>) -> Result<(), (String, String)> {
    match r {
        Ok(_) => Ok(()),
        Err(etcd_client::Error::GRpcStatus(s)) => {
            Err((format!("{:?}", s.code()), s.message().to_string()))
        }
        Err(e) => panic!("not a gRPC status: {e}"),
    }
}

/// Enforcement beyond plain keys, through etcd's Rust client on a 3-member raft cluster:
/// the Lock and Election services run as the caller (a lock or a campaign outside the
/// user's keys is refused), a lease whose keys the user cannot write can be neither
/// revoked nor attached to, nor its keys listed, and a txn is refused for a nested op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_auth_covers_locks_elections_leases_and_nested_txns() {
    use etcd_client::{Client, ConnectOptions, Permission, PutOptions, Txn, TxnOp};

    let raft = start_target(TargetKind::Raft, 3).await;
    let endpoints = raft.endpoints();
    let connect = |user: Option<(&str, &str)>| {
        let options = user.map(|(u, p)| ConnectOptions::new().with_user(u, p));
        Client::connect(endpoints.clone(), options)
    };
    let mut admin = connect(None).await.expect("connect");
    admin.user_add("root", "rootpw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("app").await.unwrap();
    let app = Permission::read_write("app/").with_prefix();
    admin.role_grant_permission("app", app).await.unwrap();
    admin.user_add("alice", "alicepw", None).await.unwrap();
    admin.user_grant_role("alice", "app").await.unwrap();
    admin.auth_enable().await.unwrap();
    let mut root = connect(Some(("root", "rootpw"))).await.expect("root");
    let mut alice = connect(Some(("alice", "alicepw"))).await.expect("alice");
    let denied = Err((
        "PermissionDenied".to_string(),
        "etcdserver: permission denied".to_string(),
    ));

    // Locks and elections: only under alice's prefix.
    let mine = alice.lease_grant(60, None).await.unwrap().id();
    let lock = alice
        .lock(
            "app/lock",
            Some(etcd_client::LockOptions::new().with_lease(mine)),
        )
        .await
        .expect("a lock under app/");
    alice.unlock(lock.key()).await.expect("unlock");
    let other = Some(etcd_client::LockOptions::new().with_lease(mine));
    assert_eq!(refusal(alice.lock("other", other).await), denied);
    assert_eq!(
        refusal(alice.campaign("other", "v", mine).await),
        denied,
        "campaign"
    );
    assert!(alice.campaign("app/elect", "v", mine).await.is_ok());

    // A lease holding a key alice cannot write.
    let roots = root.lease_grant(60, None).await.unwrap().id();
    let leased = PutOptions::new().with_lease(roots);
    root.put("secret", "s", Some(leased.clone())).await.unwrap();
    assert_eq!(refusal(alice.lease_revoke(roots).await), denied);
    assert_eq!(refusal(alice.put("app/z", "v", Some(leased)).await), denied);
    let keys = etcd_client::LeaseTimeToLiveOptions::new().with_keys();
    assert_eq!(
        refusal(alice.lease_time_to_live(roots, Some(keys)).await),
        denied
    );
    assert!(alice.lease_revoke(mine).await.is_ok(), "her own lease");

    // A txn whose nested txn writes outside alice's keys is refused whole.
    let nested = Txn::new().and_then(vec![TxnOp::put("other", "x", None)]);
    let txn = Txn::new().and_then(vec![TxnOp::put("app/t", "1", None), TxnOp::txn(nested)]);
    assert_eq!(refusal(alice.txn(txn).await), denied);
    let kept = alice.get("app/t", None).await.unwrap();
    assert!(kept.kvs().is_empty(), "nothing of a refused txn is applied");
    raft.stop();
}
