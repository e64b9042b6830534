//! etcd API security against real processes: Debian's etcd and `coordbench serve raft`.
//! `--secure` runs of the lock workload complete without violations (on both: TLS with
//! client certificates and auth for the run's user); attach mode reaches a secured cluster
//! the test started with `--endpoints https://... --cacert --cert --key --user`, and
//! without the client certificate, with a CA that did not sign the servers' certificate,
//! without a user or with a wrong password, fails in one line with exit 2, within the
//! connect timeout; clients idle past the token TTL re-authenticate. Tests that need etcd are skipped without it, but fail when
//! `CI` is set.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{run_json, within};
use coordbench_drivers::etcd::{EtcdSecurity, EtcdUser};
use coordbench_lab::provision::etcd::{EtcdOptions, SecureEtcd};
use coordbench_lab::provision::raft::RaftOptions;
use coordbench_lab::provision::{etcd, raft, Cluster, ClusterSpec, DiskKind};
use coordbench_tls::{ClientTls, RunCertificates};
use tempfile::TempDir;

/// Starting a cluster or one short CLI run.
const BOUND: Duration = Duration::from_secs(90);
/// A refused connect must end within the connect timeout (5 s) plus start-up slack.
const REFUSAL_BOUND: Duration = Duration::from_secs(30);
const ETCD: &str = "/usr/bin/etcd";
/// The started etcd's simple-token TTL: short, so a test sees tokens expire.
const TOKEN_TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Etcd,
    Raft,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Etcd => "etcd",
            Target::Raft => "raft",
        }
    }

    /// Whether the target can run here (etcd must be installed; under CI it must be).
    fn available(self) -> bool {
        self == Target::Raft || coordbench_sim::tools::installed(ETCD)
    }
}

fn client_tls(certs: &RunCertificates) -> Arc<coordbench_tls::rustls::ClientConfig> {
    coordbench_tls::client_config(&ClientTls {
        ca: Some(certs.ca.clone()),
        cert: Some(certs.client_cert.clone()),
        key: Some(certs.client_key.clone()),
        skip_verify: false,
    })
    .unwrap()
}

/// Starts one secured member of `target` on tmpfs on free ports, with certificates in
/// `work/tls`, with auth and the user alice (a short token TTL).
async fn start_secured(target: Target, work: &Path) -> (Cluster, RunCertificates) {
    let certs = coordbench_tls::generate(&work.join("tls")).unwrap();
    // Free ports: fixed ones in the ephemeral range can be held by another test's
    // connection in TIME_WAIT.
    let spec = ClusterSpec::new(
        1,
        DiskKind::Tmpfs,
        Duration::from_secs(10),
        work.to_path_buf(),
    );
    let started = match target {
        Target::Etcd => {
            let options = EtcdOptions {
                secure: Some(SecureEtcd {
                    certs: certs.clone(),
                    tls: client_tls(&certs),
                    user: EtcdUser::new("alice", "s3cret"),
                    token_ttl: Some(TOKEN_TTL),
                }),
                ..EtcdOptions::default()
            };
            within(BOUND, "starting etcd", etcd::start(&spec, &options)).await
        }
        Target::Raft => {
            let options = RaftOptions {
                tls: Some(certs.clone()),
                client: EtcdSecurity {
                    tls: Some(client_tls(&certs)),
                    user: Some(EtcdUser::new("alice", "s3cret")),
                },
                auth_token_ttl: Some(TOKEN_TTL),
                ..common::raft_options()
            };
            within(BOUND, "starting raft", raft::start(&spec, &options)).await
        }
    };
    let cluster = started.unwrap_or_else(|e| panic!("starting {}: {e}", target.name()));
    (cluster, certs)
}

/// Runs `coordbench run ARGS` with `env`; (exit code, stderr, how long it took).
async fn coordbench_run(args: &[String], env: &[(&str, &str)]) -> (i32, String, Duration) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordbench"));
    command.arg("run").args(args).kill_on_drop(true);
    command.env_remove(coordbench_bench::etcd_access::PASSWORD_ENV);
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let out = within(BOUND, "coordbench run", command.output())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

fn lock_run(target: Target, out: &Path, extra: &[&str]) -> Vec<String> {
    common::lock_run_args(target.name(), out, extra)
}

async fn secure_lock_run_has_no_violations(target: Target) {
    if !target.available() {
        return;
    }
    let work = TempDir::new().unwrap();
    let out = work.path().join("run");
    let (code, stderr, _) = coordbench_run(&lock_run(target, &out, &["--secure"]), &[]).await;
    assert_eq!(code, 0, "{}: {stderr}", target.name());
    let run = run_json(&out);
    assert_eq!(run["results"]["violations"], 0, "{run}");
    assert!(run["results"]["ops"].as_u64().unwrap_or(0) > 0, "{run}");
    let config = &run["config"];
    assert_eq!(config["secure"], true);
    assert_eq!(config["etcd_tls"], true);
    assert_eq!(config["etcd_tls_client_cert"], true);
    assert_eq!(config["etcd_user"], "coordbench", "{}", target.name());
    let settings = run["cluster"]["settings"].to_string();
    assert!(settings.contains("readwrite on every key"), "{settings}");
    let client_url = run["cluster"]["members"][0]["client_url"].as_str().unwrap();
    assert!(client_url.starts_with("https://"), "{client_url}");
    for file in ["ca.pem", "client.pem", "client-key.pem"] {
        assert!(
            out.join("tls").join(file).is_file(),
            "{file} in the run's tls/"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_secure_lock_run_has_no_violations() {
    secure_lock_run_has_no_violations(Target::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_secure_lock_run_has_no_violations() {
    secure_lock_run_has_no_violations(Target::Raft).await;
}

/// A refused run: exit 2, one line on stderr containing `needle`, within the bound.
async fn assert_refused(target: Target, args: Vec<String>, env: &[(&str, &str)], needle: &str) {
    let (code, stderr, took) = coordbench_run(&args, env).await;
    let line = common::assert_refused_in_one_line(code, &stderr, needle, target.name());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(took < REFUSAL_BOUND, "{} took {took:?}", target.name());
    eprintln!("{}: {line}", target.name());
}

/// Attach mode: with the CA, the client certificate and the user (its password from the
/// environment) a run completes; without the certificate, with another CA, without the
/// user or with a wrong password it is refused in one line.
async fn attach_with_tls(target: Target) {
    if !target.available() {
        return;
    }
    let work = TempDir::new().unwrap();
    let (cluster, certs) = start_secured(target, work.path()).await;
    let endpoints = cluster.endpoints().join(",");
    assert!(endpoints.starts_with("https://"), "{endpoints}");
    let (ca, cert, key) = (
        certs.ca.display().to_string(),
        certs.client_cert.display().to_string(),
        certs.client_key.display().to_string(),
    );
    let mut attach = vec![
        "--endpoints",
        &endpoints,
        "--cacert",
        &ca,
        "--cert",
        &cert,
        "--key",
        &key,
    ];
    attach.extend(["--user", "alice"]);
    let env = [(coordbench_bench::etcd_access::PASSWORD_ENV, "s3cret")];
    let out = work.path().join("attached");
    let (code, stderr, _) = coordbench_run(&lock_run(target, &out, &attach), &env).await;
    assert_eq!(code, 0, "{}: {stderr}", target.name());
    let run = run_json(&out);
    assert_eq!(run["results"]["violations"], 0, "{run}");
    assert_eq!(run["config"]["etcd_tls_ca"], true);
    let text = std::fs::read_to_string(out.join("run.json")).unwrap();
    assert!(!text.contains("s3cret"), "run.json holds no password");
    assert_eq!(run["config"]["etcd_user"], "alice");

    let dir = |name: &str| work.path().join(name);
    // A lab's shortcut: no CA, any server certificate accepted (the client certificate
    // is still required by the server).
    let mut unverified = vec![
        "--endpoints",
        &endpoints,
        "--insecure-skip-tls-verify",
        "--cert",
        &cert,
        "--key",
        &key,
    ];
    unverified.extend(["--user", "alice"]);
    let (code, stderr, _) =
        coordbench_run(&lock_run(target, &dir("unverified"), &unverified), &env).await;
    assert_eq!(code, 0, "{}: {stderr}", target.name());
    assert_eq!(
        run_json(&dir("unverified"))["config"]["etcd_tls_skip_verify"],
        true
    );

    let no_cert = ["--endpoints", &endpoints, "--cacert", &ca];
    assert_refused(
        target,
        lock_run(target, &dir("no-cert"), &no_cert),
        &env,
        "--cert",
    )
    .await;

    let other = coordbench_tls::generate(&work.path().join("other-ca")).unwrap();
    let other_ca = other.ca.display().to_string();
    let wrong_ca = [
        "--endpoints",
        &endpoints,
        "--cacert",
        &other_ca,
        "--cert",
        &cert,
        "--key",
        &key,
    ];
    assert_refused(
        target,
        lock_run(target, &dir("wrong-ca"), &wrong_ca),
        &env,
        "--cacert",
    )
    .await;

    {
        let no_user = [
            "--endpoints",
            &endpoints,
            "--cacert",
            &ca,
            "--cert",
            &cert,
            "--key",
            &key,
        ];
        assert_refused(
            target,
            lock_run(target, &dir("no-user"), &no_user),
            &env,
            "--user",
        )
        .await;
        let wrong = [(coordbench_bench::etcd_access::PASSWORD_ENV, "wrong")];
        assert_refused(
            target,
            lock_run(target, &dir("wrong-password"), &attach),
            &wrong,
            "alice",
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_attach_mode_uses_tls_and_auth() {
    attach_with_tls(Target::Etcd).await;
}

/// A client idle past the token TTL has its token refused ("invalid auth token") and
/// re-authenticates once, transparently, as a long run's clients must.
async fn clients_renew_expired_tokens(target: Target) {
    if !target.available() {
        return;
    }
    let work = TempDir::new().unwrap();
    let (cluster, certs) = start_secured(target, work.path()).await;
    let alice = EtcdSecurity {
        tls: Some(client_tls(&certs)),
        user: Some(EtcdUser::new("alice", "s3cret")),
    };
    let mut client = within(
        BOUND,
        "connecting as alice",
        coordbench_drivers::etcd::connect_client(
            &cluster.endpoints(),
            &alice,
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    for round in 0..3 {
        within(
            BOUND,
            "put",
            client.put("/coordbench/token", format!("{round}"), None),
        )
        .await
        .unwrap_or_else(|e| panic!("put after {round} idle periods: {e}"));
        // etcd checks token expiry once a second: idle well past the TTL.
        tokio::time::sleep(TOKEN_TTL * 3).await;
    }
    let got = within(BOUND, "get", client.get("/coordbench/token", None))
        .await
        .unwrap();
    assert_eq!(got.kvs()[0].value(), b"2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_clients_renew_expired_tokens() {
    clients_renew_expired_tokens(Target::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_clients_renew_expired_tokens() {
    clients_renew_expired_tokens(Target::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_attach_mode_uses_tls_and_auth() {
    attach_with_tls(Target::Raft).await;
}

/// Fault injection reaches a secured cluster with the run's TLS: leader detection (Status
/// per member), probe writes and the lost-writes read-back all work under `--secure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_secure_run_measures_failover() {
    let work = TempDir::new().unwrap();
    let out = work.path().join("run");
    let mut args: Vec<String> = [
        "--target",
        "raft",
        "--secure",
        "--workload",
        "kv-put",
        "--clients",
        "4",
        "--cluster-size",
        "3",
        "--disk",
        "tmpfs",
        // Long enough for a fault and its new leader even when the injector's own
        // sessions wait for their authentications (a bcrypt check each) on a loaded machine.
        "--duration",
        "10s",
        "--warmup",
        "0s",
        "--fault",
        "kill-leader",
        "--fault-every",
        "2s",
        "--quiet",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(out.display().to_string());
    let (code, stderr, _) = coordbench_run(&args, &[]).await;
    assert_eq!(code, 0, "{stderr}");
    let faults = &run_json(&out)["faults"];
    assert!(faults["new_leaders"].as_u64().unwrap_or(0) >= 1, "{faults}");
    assert_eq!(faults["unrecovered"], 0, "{faults}");
    assert_eq!(faults["lost_writes"]["lost"], 0, "{faults}");
    assert!(
        faults["lost_writes"]["checked"].as_u64().unwrap_or(0) > 0,
        "{faults}"
    );
}

/// etcd's own Go client, etcdctl 3.4, against the secured clusters with the run's
/// certificates and the user: raft's rustls listener with client certificates
/// and ALPN, and its `:authority` rewriter under TLS (`endpoint status`).
async fn etcdctl_reaches_secured(target: Target) {
    if !target.available() || !common::etcdctl::present() {
        return;
    }
    let work = TempDir::new().unwrap();
    let (cluster, certs) = start_secured(target, work.path()).await;
    let endpoints = cluster.endpoints().join(",");
    let flags = vec![
        format!("--cacert={}", certs.ca.display()),
        format!("--cert={}", certs.client_cert.display()),
        format!("--key={}", certs.client_key.display()),
        "--user=alice:s3cret".into(),
    ];
    ctl(&endpoints, &["put", "/etcdctl/k", "v"], &flags).await;
    let value = ctl(
        &endpoints,
        &["get", "/etcdctl/k", "--print-value-only"],
        &flags,
    )
    .await;
    assert_eq!(value.trim(), "v", "{}", target.name());
    let status = ctl(&endpoints, &["endpoint", "status"], &flags).await;
    assert!(status.contains("https://"), "{}: {status}", target.name());
}

/// `etcdctl ARGS FLAGS` against `endpoints`; its stdout.
async fn ctl(endpoints: &str, args: &[&str], flags: &[String]) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(flags.iter().map(String::as_str));
    common::etcdctl::ctl(endpoints, &all, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_reaches_secured_etcd() {
    etcdctl_reaches_secured(Target::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_reaches_secured_raft() {
    etcdctl_reaches_secured(Target::Raft).await;
}
