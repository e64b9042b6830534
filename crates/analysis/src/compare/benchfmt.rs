//! Go's benchmark format, which Go's benchstat reads: one line per measurement,
//! `BenchmarkName 1 VALUE UNIT`. A gate writes each side's repeats in it (baseline.txt,
//! candidate.txt beside gate.md), so anyone can cross-check its verdicts with
//! `benchstat baseline.txt candidate.txt` (whose test is the unpaired Mann-Whitney U).

use std::fmt::Write as _;

use super::Comparison;

/// Which side of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Baseline,
    Candidate,
}

/// One measurement: `BenchmarkNAME 1 VALUE UNIT`, the iteration count 1 (one run). Spaces
/// in `name` become `/`, the separator of Go's sub-benchmark names, and in `unit` `_`.
pub fn line(name: &str, value: f64, unit: &str) -> String {
    let name: Vec<&str> = name.split_whitespace().collect();
    let unit: Vec<&str> = unit.split_whitespace().collect();
    format!("Benchmark{} 1 {value} {}", name.join("/"), unit.join("_"))
}

/// Every figure's repeats of one side, point by point, in the order the comparison holds
/// them (a gate's repeat order): `BenchmarkGate/raft/kv-put 1 1234.5 throughput_ops_s`.
pub fn side(comparison: &Comparison, side: Side) -> String {
    let mut text = String::new();
    for point in &comparison.points {
        for judged in &point.figures {
            let values = match side {
                Side::Baseline => &judged.base_values,
                Side::Candidate => &judged.cand_values,
            };
            for v in values {
                let name = format!("Gate {}", point.label);
                let _ = writeln!(text, "{}", line(&name, *v, &judged.figure));
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_go_benchmark_names_and_one_iteration() {
        assert_eq!(
            line("Gate raft kv-put", 1234.5, "throughput_ops_s"),
            "BenchmarkGate/raft/kv-put 1 1234.5 throughput_ops_s"
        );
        assert_eq!(line("X", 3.0, "ns/op"), "BenchmarkX 1 3 ns/op");
        assert_eq!(line("X  y", 0.25, "a b"), "BenchmarkX/y 1 0.25 a_b");
    }
}
