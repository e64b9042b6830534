//! End-to-end tests of `coordbench sweep` and `coordbench report`: a tiny sweep on the
//! built-in engines (1-member raft and zab clusters on 127.0.0.1, 1 s points) writing
//! summary.csv, SVG and PNG charts and report.md; rerunning it skipping complete points and
//! rerunning an incomplete one; Ctrl-C during a point (exit 130, the point written as
//! incomplete) and the rerun completing only the missing points; a sweep over two clusters
//! started by hand (`coordbench serve raft` and `serve zab`) with per-target endpoints; a
//! report on a hand-made summary.csv with published figures beside ours; and bad specs
//! refused in one line.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_coordbench");

fn sweep(spec: &Path, out: &Path) -> Output {
    Command::new(BIN)
        .arg("sweep")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .expect("coordbench runs")
}

#[path = "common/output.rs"]
mod output;
use output::describe;

fn complete(dir: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("complete")?.as_bool()
}

fn csv_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(path).expect("summary.csv reads");
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

/// A PNG that decodes to the chart's size and is not blank.
fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{}",
        path.display()
    );
    assert!(bytes.len() > 10_000, "{} is nearly empty", path.display());
}

/// A one-member cluster of a built-in engine started by hand, as a user would; killed
/// when dropped.
struct Member {
    child: std::process::Child,
    client: u16,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on now (the kernel's pick, released at once).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().unwrap().port()
}

/// `coordbench serve ENGINE` as one member on free 127.0.0.1 ports, once its client port
/// accepts connections.
fn serve(engine: &str, data: &Path) -> Member {
    let (peer, client) = (free_port(), free_port());
    let child = Command::new(BIN)
        .args(["serve", engine, "--id", "1", "--disk", "nofsync"])
        .arg(format!("--peers=1=127.0.0.1:{peer}"))
        .arg(format!("--clients=1=127.0.0.1:{client}"))
        .arg("--data-dir")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("coordbench serve starts");
    let mut member = Member { child, client };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
        let exited = member.child.try_wait().expect("wait");
        assert!(exited.is_none(), "{engine} member exited: {exited:?}");
        assert!(
            Instant::now() < deadline,
            "{engine} never listened on {client}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    member
}

#[test]
fn a_sweep_compares_two_clusters_started_by_hand_through_per_target_endpoints() {
    let tmp = TempDir::new().unwrap();
    let raft = serve("raft", &tmp.path().join("raft-data"));
    let zab = serve("zab", &tmp.path().join("zab-data"));
    let spec = tmp.path().join("attached.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"attached\"\nworkload = \"kv-put\"\nwarmup = \"0s\"\nduration = \"1s\"\n\
             [options]\nclients = 2\n\
             [targets.raft]\nendpoints = \"127.0.0.1:{}\"\n\
             [targets.zab]\nendpoints = [\"127.0.0.1:{}\"]\n",
            raft.client, zab.client
        ),
    )
    .unwrap();
    let out = tmp.path().join("sweep");
    let ran = sweep(&spec, &out);
    assert!(ran.status.success(), "{}", describe(&ran));

    let (header, rows) = csv_rows(&out.join("summary.csv"));
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["raft-r1", "zab-r1"], "{header:?}");
    let throughput = header.iter().position(|h| h == "throughput_ops_s").unwrap();
    for (row, member) in rows.iter().zip([&raft, &zab]) {
        let t: f64 = row[throughput].parse().unwrap();
        assert!(t > 0.0, "{row:?}");
        // The point ran against the member started here, not a cluster of its own.
        let run = std::fs::read_to_string(out.join(&row[0]).join("run.json")).unwrap();
        let run: serde_json::Value = serde_json::from_str(&run).unwrap();
        let attached = run.to_string();
        assert!(
            attached.contains(&format!("127.0.0.1:{}", member.client)),
            "{} run.json does not name its endpoint",
            row[0]
        );
    }
    assert!(out.join("report.md").exists());
    assert!(out.join("report.html").exists());
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        record["target_options"]["zab"],
        serde_json::json!(["--endpoints", format!("127.0.0.1:{}", zab.client)])
    );
}

const TINY: &str = r#"
name = "tiny"
targets = ["raft", "zab"]
workload = "kv-put"
warmup = "0s"
duration = "1s"
[options]
cluster_size = 1
disk = "tmpfs"
[axes]
clients = [1, 4]
"#;

#[test]
fn a_tiny_sweep_writes_summary_charts_and_report_and_resumes() {
    let tmp = TempDir::new().unwrap();
    let spec = tmp.path().join("tiny.toml");
    std::fs::write(&spec, TINY).unwrap();
    let out = tmp.path().join("sweep");

    let started = Instant::now();
    let first = sweep(&spec, &out);
    assert!(first.status.success(), "{}", describe(&first));
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{:?}",
        started.elapsed()
    );

    let (header, rows) = csv_rows(&out.join("summary.csv"));
    assert_eq!(
        header[..4],
        ["point", "repeat", "target", "clients"],
        "{header:?}"
    );
    assert!(header.iter().any(|h| h == "throughput_ops_s"), "{header:?}");
    assert_eq!(rows.len(), 4, "{rows:?}");
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        [
            "raft-clients=1-r1",
            "raft-clients=4-r1",
            "zab-clients=1-r1",
            "zab-clients=4-r1"
        ]
    );
    let throughput = header.iter().position(|h| h == "throughput_ops_s").unwrap();
    for row in &rows {
        let t: f64 = row[throughput].parse().unwrap();
        assert!(t > 0.0, "{row:?}");
        assert!(out.join(&row[0]).join("latency.hlog").exists());
    }
    for stem in [
        "throughput-vs-clients",
        "p99-vs-clients",
        "spectrum-clients=1",
        "spectrum-clients=4",
        "cdf-raft",
        "cdf-zab",
    ] {
        assert_png(&out.join("charts").join(format!("{stem}.png")));
        let svg = std::fs::read_to_string(out.join("charts").join(format!("{stem}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{stem}");
    }
    let svg = std::fs::read_to_string(out.join("charts/throughput-vs-clients.svg")).unwrap();
    assert!(
        svg.contains("throughput (ops/s)") && svg.contains("zab"),
        "axis label and legend"
    );
    // Every target at one point, on the percentile axis.
    let svg = std::fs::read_to_string(out.join("charts/spectrum-clients=4.svg")).unwrap();
    for needle in ["raft", "zab", "90%", "latency (ms)"] {
        assert!(svg.contains(needle), "{needle} in the spectrum chart");
    }
    // A 1 s point has far fewer than the 100,000 operations p99.99 needs: its lines stop
    // short, and the footer says so.
    assert!(
        svg.contains("stop at the highest percentile with 10 operations beyond it"),
        "the spectrum's footer"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Latency by percentile: clients=4"), "{html}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("charts/throughput-vs-clients.png"),
        "{report}"
    );
    assert!(report.contains("| raft (coordbench) |"), "{report}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["complete"], true);
    assert!(record["spec"].as_str().unwrap().contains("tiny"));
    assert!(record["environment"]["cores"].as_u64().unwrap() > 0);

    // Resume: a point whose run.json says incomplete runs again; complete ones are kept.
    let redo = out.join("zab-clients=1-r1");
    let text = std::fs::read_to_string(redo.join("run.json")).unwrap();
    std::fs::write(
        redo.join("run.json"),
        text.replacen("\"complete\": true", "\"complete\": false", 1),
    )
    .unwrap();
    let kept = std::fs::read_to_string(out.join("raft-clients=4-r1/run.json")).unwrap();
    let second = sweep(&spec, &out);
    assert!(second.status.success(), "{}", describe(&second));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("3 already complete, 1 to run"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(out.join("raft-clients=4-r1/run.json")).unwrap(),
        kept
    );
    assert_eq!(complete(&redo), Some(true));
    assert_eq!(csv_rows(&out.join("summary.csv")).1.len(), 4);

    // A rerun with nothing left to run reports when the sweep's points really ran.
    let times = |dir: &Path| {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        (
            v["started_at"].as_str().unwrap().to_string(),
            v["finished_at"].as_str().unwrap().to_string(),
        )
    };
    let before = times(&out);
    let point = |name: &str| times(&out.join(name));
    assert_eq!(before.0, point("raft-clients=1-r1").0);
    assert_eq!(before.1, point("zab-clients=1-r1").1, "the point run last");
    let third = sweep(&spec, &out);
    assert!(third.status.success(), "{}", describe(&third));
    assert_eq!(times(&out), before);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains(&format!("Started {}", before.0)),
        "{report}"
    );
}

#[test]
fn ctrl_c_stops_the_current_point_and_a_rerun_runs_only_the_missing_points() {
    let tmp = TempDir::new().unwrap();
    let spec = tmp.path().join("three.toml");
    std::fs::write(
        &spec,
        "targets = [\"raft\"]\nworkload = \"kv-put\"\nwarmup = \"0s\"\nduration = \"3s\"\n\
         [options]\ncluster_size = 1\ndisk = \"tmpfs\"\nclients = 2\n[axes]\nvalue_size = [16, 64, 256]\n",
    )
    .unwrap();
    let out = tmp.path().join("sweep");
    let mut child = Command::new(BIN)
        .arg("sweep")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the second point has been measuring for a moment.
    let second = out.join("raft-value_size=64-r1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !second.join("logs").exists() {
        assert!(Instant::now() < deadline, "the second point never started");
        assert!(child.try_wait().unwrap().is_none(), "sweep ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", describe(&output));
    assert_eq!(complete(&out.join("raft-value_size=16-r1")), Some(true));
    assert_eq!(
        complete(&second),
        Some(false),
        "the interrupted point is written"
    );
    assert!(!out.join("raft-value_size=256-r1").exists());
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        (
            record["complete"].as_bool(),
            record["interrupted"].as_bool()
        ),
        (Some(false), Some(true))
    );

    let rerun = sweep(&spec, &out);
    assert!(rerun.status.success(), "{}", describe(&rerun));
    let stderr = String::from_utf8_lossy(&rerun.stderr);
    assert!(stderr.contains("1 already complete, 2 to run"), "{stderr}");
    assert_eq!(csv_rows(&out.join("summary.csv")).1.len(), 3);
    assert!(out.join("report.md").exists());
}

#[test]
fn a_report_on_a_hand_made_summary_puts_published_figures_beside_ours() {
    let tmp = TempDir::new().unwrap();
    let mut csv = String::from(
        "target,workload,recipe,cluster_size,clients,locks,throughput_ops_s,p50_us,p99_us,errors,requests_per_op,notifications_per_release,complete\n",
    );
    for (target, base) in [("etcd", 9000.0), ("zookeeper", 5000.0)] {
        for (size, factor) in [(3, 1.0), (5, 0.85), (7, 0.7)] {
            // etcd's points are repeated three times, ±10% around the same mean.
            let repeats: &[f64] = if target == "etcd" {
                &[0.9, 1.0, 1.1]
            } else {
                &[1.0]
            };
            for spread in repeats {
                csv.push_str(&format!(
                    "{target},kv-put,,{size},32,1,{},900,{},0,1,,true\n",
                    base * factor * spread,
                    2000 * size
                ));
            }
        }
    }
    csv.push_str("zookeeper,kv-put,,9,32,1,1,1,1,0,1,,false\n");
    std::fs::write(tmp.path().join("summary.csv"), csv).unwrap();
    let o = Command::new(BIN)
        .arg("report")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    for stem in ["throughput-vs-cluster_size", "p99-vs-cluster_size"] {
        assert_png(&tmp.path().join("charts").join(format!("{stem}.png")));
        assert!(tmp
            .path()
            .join("charts")
            .join(format!("{stem}.svg"))
            .exists());
    }
    // The spread of etcd's repeats: a bar per point, whose mid-point mark is r=6 (half the
    // bar's 12 px width; the line's own markers are r=4).
    let svg =
        std::fs::read_to_string(tmp.path().join("charts/throughput-vs-cluster_size.svg")).unwrap();
    assert_eq!(svg.matches("r=\"6\"").count(), 3, "one bar per etcd point");
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert_eq!(html.matches("<svg").count(), 2, "both charts inline");
    assert!(html.contains("<table>") && !html.contains(".png"), "{html}");
    let report = std::fs::read_to_string(tmp.path().join("report.md")).unwrap();
    for needle in [
        "12 of 13 runs complete",
        "ZooKeeper paper, Table 1",
        "| 3 | 21k | 1.00 | 9000 | 1.00 | 5000 | 1.00 |",
        "| 13 | 8000 | 0.38 |",
        "etcd dbtester",
        "| average write throughput (ops/s) | 35.3k | 16.8k | 2.09 | 9000 | 5000 | 1.80 |",
        "other hardware",
    ] {
        assert!(
            report.contains(needle),
            "{needle:?} missing from:\n{report}"
        );
    }

    // Lock rows with the herd columns: notifications per release against waiters.
    let herd = TempDir::new().unwrap();
    let mut csv = String::from(
        "target,workload,recipe,clients,locks,throughput_ops_s,p99_us,requests_per_release,notifications_per_release,complete\n",
    );
    for waiters in [1u32, 4, 16] {
        let n = waiters as f64;
        csv.push_str(&format!(
            "etcd,lock,etcd-mutex,{},1,500,3000,3,1,true\n",
            waiters + 1
        ));
        csv.push_str(&format!(
            "etcd,lock,naive,{},1,300,9000,{},{n},true\n",
            waiters + 1,
            n + 2.0
        ));
    }
    std::fs::write(herd.path().join("summary.csv"), csv).unwrap();
    let o = Command::new(BIN)
        .arg("report")
        .arg(herd.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    assert_png(&herd.path().join("charts/herd-notifications-vs-waiters.png"));
    assert_png(&herd.path().join("charts/herd-requests-vs-waiters.png"));
    let svg = std::fs::read_to_string(herd.path().join("charts/herd-notifications-vs-waiters.svg"))
        .unwrap();
    assert!(
        svg.contains("etcd naive") && svg.contains("etcd etcd-mutex"),
        "legend per recipe"
    );
}

#[test]
fn a_missing_font_or_summary_is_an_error_not_a_panic() {
    let tmp = TempDir::new().unwrap();
    let err = coordbench_analysis::report::write(
        tmp.path(),
        Path::new("/nonexistent/font.ttf"),
        &coordbench_analysis::report::Planning::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("fonts-dejavu-core"), "{err}");
    let o = Command::new(BIN)
        .arg("report")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("summary.csv") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn a_bad_spec_exits_2_naming_file_line_and_field() {
    let tmp = TempDir::new().unwrap();
    let spec = tmp.path().join("bad.toml");
    std::fs::write(
        &spec,
        "targets = [\"raft\"]\nworkload = \"kv-put\"\n[axes]\ncluster_size = [1, 30]\n",
    )
    .unwrap();
    let o = sweep(&spec, &tmp.path().join("out"));
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("bad.toml:4: axes.cluster_size: "),
        "{stderr}"
    );
    assert!(
        !tmp.path().join("out").exists(),
        "nothing starts for a bad spec"
    );
}
