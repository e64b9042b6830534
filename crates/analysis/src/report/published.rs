//! Published figures (docs/published-figures.md, with their sources) put beside ours where a sweep
//! measures the same thing. Absolute numbers come from other hardware and years; what must
//! reproduce is the shape, so each table also shows values relative to a common base.

use std::fmt::Write;

use super::chart::number;
use super::groups::mean;
use super::table::Table;

/// ZooKeeper paper (Hunt et al., USENIX ATC 2010), Table 1, 0% reads column: saturated
/// write throughput by servers.
pub(crate) const ZK_TABLE1_WRITES: [(u32, f64); 5] = [
    (3, 21_000.0),
    (5, 18_000.0),
    (7, 14_000.0),
    (9, 12_000.0),
    (13, 8_000.0),
];

/// The same table's 100% reads column.
pub(crate) const ZK_TABLE1_READS: [(u32, f64); 5] = [
    (3, 87_000.0),
    (5, 165_000.0),
    (7, 257_000.0),
    (9, 296_000.0),
    (13, 460_000.0),
];

/// The same paper's Table 2: creates per second by workers (rows: 1, 10, 20) and servers
/// (columns: 3, 5, 7, 9).
pub(crate) const ZK_TABLE2_SERVERS: [u32; 4] = [3, 5, 7, 9];
pub(crate) const ZK_TABLE2_CREATES: [(u32, [f64; 4]); 3] = [
    (1, [776.0, 748.0, 758.0, 711.0]),
    (10, [2_074.0, 1_832.0, 1_572.0, 1_540.0]),
    (20, [2_740.0, 2_336.0, 1_934.0, 1_890.0]),
];

/// One point of the Raft paper's election-time CDF that the paper states in numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElectionPoint {
    /// The timeout range (ms) of the paper's line.
    pub min_ms: u32,
    pub max_ms: u32,
    /// Time without a leader (ms) and the fraction of trials at or below it.
    pub at_ms: f64,
    pub fraction: f64,
    pub what: &'static str,
}

/// Raft paper (Ongaro and Ousterhout, USENIX ATC 2014), Figure 16 and its text in section
/// 9.3: 5 servers, broadcast time about 15 ms, crash at a random point of a heartbeat
/// interval. Only the numbers the text states; the curves themselves are not transcribed.
pub const RAFT_FIGURE16: [ElectionPoint; 4] = [
    ElectionPoint {
        min_ms: 150,
        max_ms: 150,
        at_ms: 10_000.0,
        fraction: 0.0,
        what: "consistently over 10 s",
    },
    ElectionPoint {
        min_ms: 150,
        max_ms: 155,
        at_ms: 287.0,
        fraction: 0.5,
        what: "median 287 ms",
    },
    ElectionPoint {
        min_ms: 150,
        max_ms: 200,
        at_ms: 513.0,
        fraction: 1.0,
        what: "worst of 1,000: 513 ms",
    },
    ElectionPoint {
        min_ms: 12,
        max_ms: 24,
        at_ms: 152.0,
        fraction: 1.0,
        what: "longest 152 ms (mean 35 ms)",
    },
];

/// etcd dbtester (2018): etcd 3.3 vs ZooKeeper 3.5.3, 3 servers, 1M writes.
const DBTESTER: [(&str, f64, f64); 2] = [
    ("average write throughput (ops/s)", 35_258.0, 16_842.0),
    ("write p99 (ms)", 74.0, 273.0),
];

const SHAPE_NOTE: &str = "Absolute numbers come from other hardware, other years and other \
client counts; what must reproduce is the shape (which way the curve bends, which system \
wins, by roughly what ratio).";

/// Markdown sections for every published figure this sweep reproduces.
pub fn sections(table: &Table, rows: &[usize], x_is_cluster_size: bool) -> String {
    let writes: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| table.rows[r].get("workload") == Some("kv-put"))
        .collect();
    let (creates, writes): (Vec<usize>, Vec<usize>) = writes
        .into_iter()
        .partition(|&r| table.rows[r].get("create_keys") == Some("true"));
    let mut out = String::new();
    if x_is_cluster_size && !writes.is_empty() {
        out.push_str(&zk_table1(table, &writes));
    }
    if !creates.is_empty() {
        out.push_str(&zk_table2(table, &creates));
    }
    let has = |t: &str| {
        writes
            .iter()
            .any(|&r| table.rows[r].get("target") == Some(t))
    };
    if has("etcd") && has("zookeeper") {
        out.push_str(&dbtester(table, &writes));
    }
    out
}

fn targets(table: &Table, rows: &[usize]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &r in rows {
        if let Some(t) = table.rows[r].get("target") {
            if !out.iter().any(|o| o == t) {
                out.push(t.to_string());
            }
        }
    }
    out
}

fn at(table: &Table, rows: &[usize], target: &str, size: Option<u32>, column: &str) -> Option<f64> {
    let matching: Vec<usize> = rows
        .iter()
        .copied()
        .filter(|&r| {
            let row = &table.rows[r];
            row.get("target") == Some(target)
                && size.is_none_or(|s| row.num("cluster_size") == Some(s as f64))
        })
        .collect();
    mean(table, &matching, column)
}

fn zk_table1(table: &Table, rows: &[usize]) -> String {
    let targets = targets(table, rows);
    let mut sizes: Vec<u32> = ZK_TABLE1_WRITES.iter().map(|(s, _)| *s).collect();
    for &r in rows {
        if let Some(s) = table.rows[r].num("cluster_size") {
            sizes.push(s as u32);
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    let base = 3;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### Write throughput vs servers: ZooKeeper paper, Table 1\n\n\
         Source row: Hunt et al., *ZooKeeper: wait-free coordination for Internet-scale \
         systems* (USENIX ATC 2010), Table 1, column \"0% reads\" (saturated throughput, 1 KB \
         writes, 250 clients). Ours: the throughput column of this sweep (kv-put). \
         \"rel.\" is throughput relative to {base} servers. {SHAPE_NOTE} Expected shape: \
         writes fall as voters are added (every write waits on more followers).\n"
    );
    let mut header = "| servers | published ZooKeeper (ops/s) | rel. |".to_string();
    let mut rule = "|---|---|---|".to_string();
    for t in &targets {
        let _ = write!(header, " ours {t} (ops/s) | rel. |");
        rule.push_str("---|---|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    let published_base = ZK_TABLE1_WRITES
        .iter()
        .find(|(n, _)| *n == base)
        .map(|(_, v)| *v);
    for size in sizes {
        let published = ZK_TABLE1_WRITES
            .iter()
            .find(|(n, _)| *n == size)
            .map(|(_, v)| *v);
        let mut line = format!(
            "| {size} | {} | {} |",
            cell(published),
            ratio(published, published_base)
        );
        for t in &targets {
            let ours = at(table, rows, t, Some(size), "throughput_ops_s");
            let ours_base = at(table, rows, t, Some(base), "throughput_ops_s");
            let _ = write!(line, " {} | {} |", cell(ours), ratio(ours, ours_base));
        }
        let _ = writeln!(s, "{line}");
    }
    s.push('\n');
    s
}

/// Creates per second by workers (clients) and servers, ours per target beside Table 2,
/// each relative to its own 1 worker on 3 servers.
fn zk_table2(table: &Table, rows: &[usize]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### Creates vs workers and servers: ZooKeeper paper, Table 2\n\n\
         Source rows: Hunt et al. (USENIX ATC 2010), Table 2, create requests per second by \
         workers (each a client creating new znodes synchronously) on 3, 5, 7 and 9 \
         servers. Ours: kv-put --create-keys (a new key per write), `clients` as the \
         workers. \"rel.\" is relative to 1 worker on 3 servers. {SHAPE_NOTE} Expected \
         shape: creates rise with workers (pipelining across sessions) and fall slowly with \
         servers.\n"
    );
    let targets = targets(table, rows);
    let mut header = "| workers | servers | published ZooKeeper (creates/s) | rel. |".to_string();
    let mut rule = "|---|---|---|---|".to_string();
    for t in &targets {
        let _ = write!(header, " ours {t} (creates/s) | rel. |");
        rule.push_str("---|---|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    let published_base = ZK_TABLE2_CREATES[0].1[0];
    let ours_at = |t: &str, workers: u32, servers: u32| {
        let matching: Vec<usize> = rows
            .iter()
            .copied()
            .filter(|&r| table.rows[r].num("clients") == Some(f64::from(workers)))
            .collect();
        at(table, &matching, t, Some(servers), "throughput_ops_s")
    };
    for (workers, published) in ZK_TABLE2_CREATES {
        for (i, servers) in ZK_TABLE2_SERVERS.into_iter().enumerate() {
            let mut line = format!(
                "| {workers} | {servers} | {} | {} |",
                number(published[i]),
                ratio(Some(published[i]), Some(published_base))
            );
            for t in &targets {
                let ours = ours_at(t, workers, servers);
                let base = ours_at(t, 1, 3);
                let _ = write!(line, " {} | {} |", cell(ours), ratio(ours, base));
            }
            let _ = writeln!(s, "{line}");
        }
    }
    s.push('\n');
    s
}

fn dbtester(table: &Table, rows: &[usize]) -> String {
    // dbtester ran 3 servers; compare there when the sweep has it.
    let size = [3u32].into_iter().find(|&n| {
        rows.iter()
            .any(|&r| table.rows[r].num("cluster_size") == Some(n as f64))
    });
    let where_ = size.map_or("all cluster sizes of this sweep".to_string(), |n| {
        format!("{n} members")
    });
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### etcd vs ZooKeeper writes: etcd dbtester\n\n\
         Source rows: etcd dbtester (2018; 3 × 16 vCPU servers, 1M writes, 256 B keys, 1 KB \
         values), \"average throughput\" and \"p99\" for etcd 3.3 and ZooKeeper 3.5.3. Ours: \
         kv-put at {where_}. {SHAPE_NOTE} Expected shape: etcd ahead on throughput and tail \
         latency.\n"
    );
    let _ = writeln!(
        s,
        "| figure | published etcd | published ZooKeeper | published etcd/ZooKeeper | ours etcd | ours zookeeper | ours etcd/zookeeper |\n|---|---|---|---|---|---|---|"
    );
    for (i, (figure, etcd, zk)) in DBTESTER.iter().enumerate() {
        let (column, scale) = if i == 0 {
            ("throughput_ops_s", 1.0)
        } else {
            ("p99_us", 1e-3)
        };
        let ours = |t: &str| at(table, rows, t, size, column).map(|v| v * scale);
        let (oe, oz) = (ours("etcd"), ours("zookeeper"));
        let _ = writeln!(
            s,
            "| {figure} | {} | {} | {} | {} | {} | {} |",
            number(*etcd),
            number(*zk),
            ratio(Some(*etcd), Some(*zk)),
            cell(oe),
            cell(oz),
            ratio(oe, oz)
        );
    }
    s.push('\n');
    s
}

fn cell(v: Option<f64>) -> String {
    v.map_or("–".into(), number)
}

fn ratio(v: Option<f64>, base: Option<f64>) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
        _ => "–".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(csv: &str) -> (tempfile::TempDir, Table) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("summary.csv");
        std::fs::write(&path, csv).expect("summary.csv");
        let table = Table::read(&path).expect("table");
        (dir, table)
    }

    #[test]
    fn creates_go_beside_table_2_and_plain_writes_beside_table_1() {
        let (_dir, table) = table(
            "point,target,workload,create_keys,clients,cluster_size,throughput_ops_s\n\
             a,raft,kv-put,true,1,3,500\n\
             b,raft,kv-put,true,10,3,2000\n\
             c,raft,kv-put,false,10,3,4000\n",
        );
        let rows: Vec<usize> = (0..table.rows.len()).collect();
        let out = sections(&table, &rows, true);
        assert!(out.contains("Table 2") && out.contains("Table 1"), "{out}");
        let table2 = &out[out.find("Table 2").unwrap()..];
        // 10 workers on 3 servers: ours 2000 creates/s, 4x our 1 worker; published 2074.
        assert!(
            table2.contains("| 10 | 3 | 2074 | 2.67 | 2000 | 4.00 |"),
            "{table2}"
        );
        // Table 1 saw only the plain write.
        let table1 = &out[..out.find("Table 2").unwrap()];
        assert!(
            table1.contains("| 4000 |") && !table1.contains("2000"),
            "{table1}"
        );
    }
}
